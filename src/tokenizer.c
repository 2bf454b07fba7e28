/* skeleton: filled in by its owner */
#include "tokenizer.h"
