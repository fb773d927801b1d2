// Which objects are CANN's (shim/aclnn/plt_redirect.h): by their place under the install's roots, not by their name,
// so that CANN 9's libacl_rt, libacl_mdl, ... and a library CANN adds later are CANN's like 8.x's libascendcl.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "shim/aclnn/plt_redirect.h"

using namespace msprobe::shim;

namespace {

std::vector<std::string> roots_of(const std::map<std::string, std::string> &env) {
  return cann_roots([&env](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(PltRedirect, AnObjectUnderARootIsCannsWhateverItsName) {
  const std::vector<std::string> roots{"/opt/Ascend/ascend-toolkit/9.0.0"};
  for (const char *lib :
       {"lib64/libacl_rt.so", "lib64/libacl_op_executor.so", "lib64/libge_runner.so", "lib64/libascend_dump.so",
        "opp/vendors/customize/op_api/lib/libcust_opapi.so", "lib64/libsomething_new_in_cann10.so"})
    EXPECT_TRUE(under_cann_root(std::string(roots[0]) + "/" + lib, roots)) << lib;
  // A host is not, even named like a CANN library; nor is the root itself.
  EXPECT_FALSE(under_cann_root("/home/user/app/libopapi.so", roots));
  EXPECT_FALSE(under_cann_root("/opt/Ascend/ascend-toolkit/9.0.0", roots));
  EXPECT_FALSE(under_cann_root("", roots));
  EXPECT_FALSE(under_cann_root("/opt/Ascend/ascend-toolkit/9.0.0/lib64/libacl_rt.so", {}));
}

TEST(PltRedirect, ARootClaimsWholePathComponentsOnly) {
  // The stand-in's two layouts side by side: the 8.x install does not claim the 9.x one's objects.
  const std::vector<std::string> roots{"/b/fake_cann"};
  EXPECT_TRUE(under_cann_root("/b/fake_cann/lib64/libascendcl.so", roots));
  EXPECT_FALSE(under_cann_root("/b/fake_cann9/lib64/libacl_rt.so", roots));
  EXPECT_FALSE(under_cann_root("/b/fake_cannot/lib.so", roots));
}

TEST(PltRedirect, RootsAreWhatSetEnvExports) {
  const auto roots = roots_of({{"ASCEND_HOME_PATH", "/usr/local/Ascend/latest//"},
                               {"ASCEND_OPP_PATH", "/usr/local/Ascend/latest/opp"},
                               {"ASCEND_CUSTOM_OPP_PATH", "/v/a::/v/b/:"},
                               {"ASCEND_TOOLKIT_HOME", ""},
                               {"UNRELATED", "/x"}});
  EXPECT_EQ(roots,
            (std::vector<std::string>{"/usr/local/Ascend/latest", "/usr/local/Ascend/latest/opp", "/v/a", "/v/b"}));
  EXPECT_TRUE(roots_of({}).empty());
  // "/" would claim every object of the process: never a root.
  EXPECT_TRUE(roots_of({{"ASCEND_HOME_PATH", "/"}}).empty());
}

TEST(PltRedirect, ARootReachedThroughALinkAlsoClaimsItsTarget) {
  // A toolkit is reached through ascend-toolkit/latest -> <version>; the loader may name an object by either path.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("plt_redirect_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "9.0.0" / "lib64");
  fs::create_directory_symlink("9.0.0", dir / "latest");
  const auto roots = roots_of({{"ASCEND_HOME_PATH", (dir / "latest").string()}});
  ASSERT_EQ(roots.size(), 2u);
  EXPECT_TRUE(under_cann_root((dir / "latest/lib64/libacl_rt.so").string(), roots));
  EXPECT_TRUE(under_cann_root((fs::canonical(dir) / "9.0.0/lib64/libacl_rt.so").string(), roots));
  fs::remove_all(dir);
}

}  // namespace
