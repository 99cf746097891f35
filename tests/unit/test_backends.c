#include "unit.h"
void test_backend_file(void) {}
void test_backend_mem(void) {}
void test_backend_fault(void) {}
