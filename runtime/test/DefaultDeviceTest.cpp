// The default device's probe: without the NVIDIA driver it answers "cpu" without loading the
// cuda plugin, whose libraries (cudart, cuBLAS) would add about 150 MB to every CPU process's
// resident memory (seen as ds-run's host peak growing from 990 MB to 1145 MB).
#include "dsrt/dsrt.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

TEST(DefaultDevice, WithoutADriverTheCudaPluginIsNotLoaded) {
  if (void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
    GTEST_SKIP() << "an NVIDIA driver is installed here";
  }
  EXPECT_STREQ(dsrt_default_device(), "cpu");
  std::ifstream maps("/proc/self/maps");
  std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("libdsrt_cuda.so"), std::string::npos) << "the probe loaded the plugin";
  EXPECT_EQ(all.find("libcublas"), std::string::npos) << "the probe loaded cuBLAS";
}
