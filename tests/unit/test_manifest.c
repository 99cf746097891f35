#include "unit.h"
void test_manifest_golden(void) {}
void test_manifest_parse_errors(void) {}
void test_manifest_roundtrip(void) {}
