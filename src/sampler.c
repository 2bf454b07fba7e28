/* skeleton: filled in by its owner */
#include "sampler.h"
