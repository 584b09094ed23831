/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd - The umbrella header <rsd/rsd.h> and the library version
 *
 * Including <rsd/rsd.h> includes every public header of librsd. Build
 * against the installed library with
 * "cc prog.c $(pkg-config --cflags --libs librsd)". The overview of the
 * library, its concepts and every page is librsd(7).
 */
#ifndef RSD_RSD_H
#define RSD_RSD_H

#include <rsd/error.h>
#include <rsd/location.h>
#include <rsd/value.h>
#include <rsd/action.h>
#include <rsd/manager.h>
#include <rsd/lease.h>
#include <rsd/plan.h>
#include <rsd/snapshot.h>
#include <rsd/controller.h>
#include <rsd/device.h>
#include <rsd/fault.h>

/**
 * RSD_VERSION_MAJOR - The major version of the headers (0).
 */
#define RSD_VERSION_MAJOR 0
/**
 * RSD_VERSION_MINOR - The minor version of the headers (1).
 */
#define RSD_VERSION_MINOR 1

#endif
