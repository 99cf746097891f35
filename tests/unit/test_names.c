#include "unit.h"
void test_names_ids(void) {}
void test_names_paths(void) {}
void test_names_keys(void) {}
void test_names_sizes(void) {}
