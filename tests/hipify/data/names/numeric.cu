// Host-side numerics of CUDA's bf16 and fp8 conversions, printed as bits; tests/hipify/test_names_compile.py
// runs it built with nvcc and its translation built with HIP, and compares the output line by line.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// A decoded value: its bits, or "nan" (NaN payloads are not part of either format's contract).
static void print_value(const char* what, int code, float f) {
  if (f != f) {
    printf("%s %02x nan\n", what, code);
  } else {
    printf("%s %02x %08x\n", what, code, (unsigned)bits_of(f));
  }
}

int main() {
  // fp8: every encoding decoded
  for (int code = 0; code < 256; ++code) {
    __nv_fp8_e4m3 a;
    a.__x = (__nv_fp8_storage_t)code;
    __nv_fp8_e5m2 b;
    b.__x = (__nv_fp8_storage_t)code;
    print_value("e4m3", code, float(a));
    print_value("e5m2", code, float(b));
  }
  // fp8: floats encoded (round to nearest even, saturating to the finite range)
  const float values[] = {0.0f, -0.0f, 1.0f, 1.5f, -2.75f, 0.3f, 448.0f, 464.0f, 1000.0f, 57344.0f, 70000.0f,
                          0.0009765625f, 0.001953125f, 1e-6f, 3.1415927f, -17.3f, 240.0f, 0.0625f};
  for (unsigned i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
    __nv_fp8_e4m3 a(values[i]);
    __nv_fp8_e5m2 b(values[i]);
    printf("fp8 %08x %02x %02x\n", (unsigned)bits_of(values[i]), (unsigned)a.__x, (unsigned)b.__x);
  }
  // bf16: round to nearest even, ties and all
  const uint32_t floats[] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f817fffu, 0xbf808001u,
                             0x7f7fffffu, 0x00000001u, 0x00018000u, 0x80000000u, 0x7f800000u, 0x40490fdbu};
  for (unsigned i = 0; i < sizeof(floats) / sizeof(floats[0]); ++i) {
    nv_bfloat16 r = __float2bfloat16_rn(float_of(floats[i]));
    printf("bf16 %08x %04x\n", (unsigned)floats[i], (unsigned)__bfloat16_as_ushort(r));
  }
  // bf16x2: which half holds which value
  nv_bfloat162 pair = make_bfloat162(__float2bfloat16(1.0f), __float2bfloat16(-2.0f));
  uint32_t raw;
  memcpy(&raw, &pair, sizeof(raw));
  printf("bf162 %08x\n", (unsigned)raw);
  return 0;
}
