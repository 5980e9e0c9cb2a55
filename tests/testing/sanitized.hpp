// SPDX-License-Identifier: Apache-2.0
// KVINFER_TEST_SANITIZED is 1 under AddressSanitizer or ThreadSanitizer (GCC or
// Clang): sanitizers reserve address space that an RLIMIT_AS would break, so the
// tests that limit it skip there.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVINFER_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KVINFER_TEST_SANITIZED 1
#endif
#endif
