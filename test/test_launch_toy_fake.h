/* The toy's kernels (cu/graph_selftest.cu, cu/fault_trap.cu) as host functions for the driver
 * double: the module that fake_driver() is given by the graph tests on the CPU. */
#pragma once
#include "test_launch_double.h"

extern const FakeKernel toy_fake_kernels[];
extern const int toy_fake_n_kernels;
