/* skeleton: filled in by its owner */
#include "gguf.h"
