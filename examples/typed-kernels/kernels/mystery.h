// The mystery value, in a header so that the build tracks included headers.
#pragma once
#define MYSTERY_VALUE 123.0f
