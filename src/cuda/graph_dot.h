/* The Graphviz file of the decode graph (--graph-dot), after cuGraphDebugDotPrint wrote it:
 * programmatic edges drawn dashed. The driver's file does not tell the kinds of edge apart, and
 * the decode graph's edges are all of one kind, so every edge statement is rewritten:
 *     "a" -> "b" [headlabel=0];   becomes   "a" -> "b" [headlabel=0 style="dashed"];
 *     "a" -> "b";                 becomes   "a" -> "b" [style="dashed"];            */
#pragma once
#include "err.h"

/* Rewrites the dot file at path in place; ZR_E_IO / ZR_E_NOMEM with the path named. */
int zr_graph_dot_dash_edges(const char *path, ZrError *err);
