// moetrain: the whole public API in one include.
#pragma once

#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/config.h"
#include "moetrain/data.h"
#include "moetrain/device.h"
#include "moetrain/generate.h"
#include "moetrain/gradcheck.h"
#include "moetrain/hf.h"
#include "moetrain/model.h"
#include "moetrain/precision.h"
#include "moetrain/profiling.h"
#include "moetrain/safetensors.h"
#include "moetrain/stop.h"
#include "moetrain/train.h"
