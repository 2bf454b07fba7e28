/* skeleton: filled in by its owner */
#include "quant.h"
