/* SPDX-License-Identifier: MIT */
/* librsd: residency management of large values across memory tiers. */
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

#define RSD_VERSION_MAJOR 0
#define RSD_VERSION_MINOR 1

#endif
