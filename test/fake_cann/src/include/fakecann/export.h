// Visibility for the stand-in's internal cross-library API (namespace fakecann). The real CANN
// libraries export plenty of internal symbols too; these are never part of the public C ABI.
#pragma once
#define FAKECANN_API __attribute__((visibility("default")))
