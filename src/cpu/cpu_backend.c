/* skeleton: filled in by its owner */
#include "backend.h"
