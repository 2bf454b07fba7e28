/* skeleton: filled in by its owner */
#include "model.h"
