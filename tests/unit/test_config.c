#include "unit.h"
void test_config(void) {}
