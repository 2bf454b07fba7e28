/* A copy of ../shared/models/stories260K.gguf with one value of one f32 tensor replaced (a NaN,
 * an inf), for tests of what zrun does with a broken model. */
#pragma once
#include <stdint.h>

/* The copy's path (under zt_tmpdir(), named after tag; a static buffer), or NULL: after zt_skip
 * when ../shared is absent, else after a failure message. */
const char *zt_stories_patched(const char *tag, const char *tensor, int64_t at, float v);
