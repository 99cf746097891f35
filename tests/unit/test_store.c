#include "unit.h"
void test_store(void)
{
}
