/* minidc umbrella header: every layer's public API. */
#ifndef MINIDC_H
#define MINIDC_H

#include "minidc/status.h"
#include "minidc/device.h"
#include "minidc/collectives.h"
#include "minidc/algorithms.h"
#include "minidc/runtime.h"
#include "minidc/numerics.h"
#include "minidc/kernels.h"
#include "minidc/model.h"
#include "minidc/tensorfile.h"
#include "minidc/datasets.h"
#include "minidc/dp.h"
#include "minidc/mesh.h"
#include "minidc/tp.h"
#include "minidc/train.h"

#endif
