// SleepInhibitor with stand-in programs for systemd-inhibit (the real one needs logind, which the
// test machines lack): started only while busy, with the sleep-lock arguments, ended with its whole
// process group once idle; a program that exits at once or is missing is reported, not retried.
#include "server/app/sleep_inhibitor.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace splash::app {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class SleepInhibitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("splash_inhibit_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A script named `name` in the test folder.
  std::string script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    chmod(p.c_str(), 0755);
    return p.string();
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  SleepInhibitorOptions options(const std::string& program) {
    SleepInhibitorOptions o;
    o.program = program;
    o.poll = milliseconds(20);
    o.linger = milliseconds(100);
    o.settle = milliseconds(100);
    return o;
  }
  template <typename F>
  static bool eventually(F f) {
    for (int i = 0; i < 300; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return f();
  }

  fs::path dir_;
};

// The stand-in records its arguments and its pid, then becomes the long-lived child the real one runs.
TEST_F(SleepInhibitorTest, HeldWhileBusyAndEndedWhenIdle) {
  const std::string prog = script("inhibit", "echo \"$*\" > \"$(dirname \"$0\")/args\"\n"
                                             "echo $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 1000\n");
  std::atomic<bool> busy{false};
  SleepInhibitor s([&] { return busy.load(); }, options(prog));
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(fs::exists(dir_ / "args")) << "started while idle";
  EXPECT_FALSE(s.status().held);

  busy = true;
  ASSERT_TRUE(eventually([&] { return s.status().held; }));
  EXPECT_EQ(read("args"), "--what=sleep --who=splash --why=splash serve: requests in progress --mode=block sleep infinity\n");
  ASSERT_TRUE(eventually([&] { return !read("pid").empty(); }));
  const pid_t pid = std::stoi(read("pid"));
  EXPECT_EQ(kill(pid, 0), 0);
  EXPECT_EQ(s.status().acquisitions, 1);
  EXPECT_EQ(s.status().failures, 0);

  busy = false;
  ASSERT_TRUE(eventually([&] { return !s.status().held; }));
  EXPECT_NE(kill(pid, 0), 0) << "the inhibitor process outlived the busy period";

  // A second busy period takes a new one.
  busy = true;
  ASSERT_TRUE(eventually([&] { return s.status().held; }));
  EXPECT_EQ(s.status().acquisitions, 2);
}

TEST_F(SleepInhibitorTest, EndsTheProcessOnDestruction) {
  const std::string prog = script("inhibit", "echo $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 1000\n");
  pid_t pid = 0;
  {
    SleepInhibitor s([] { return true; }, options(prog));
    ASSERT_TRUE(eventually([&] { return s.status().held; }));
    ASSERT_TRUE(eventually([&] { return !read("pid").empty(); }));
    pid = std::stoi(read("pid"));
  }
  EXPECT_NE(kill(pid, 0), 0);
}

// What systemd-inhibit does without a system bus: prints why and exits 1.
TEST_F(SleepInhibitorTest, AProgramThatExitsIsReportedOncePerBusyPeriod) {
  const std::string prog = script("inhibit", "echo x >> \"$(dirname \"$0\")/runs\"\n"
                                             "echo 'Failed to connect to bus: No such file' >&2\nexit 1\n");
  SleepInhibitor s([] { return true; }, options(prog));
  ASSERT_TRUE(eventually([&] { return s.status().failures == 1; }));
  std::this_thread::sleep_for(milliseconds(200));
  const SleepInhibitorStatus st = s.status();
  EXPECT_FALSE(st.held);
  EXPECT_EQ(st.failures, 1);
  EXPECT_EQ(st.acquisitions, 0);
  EXPECT_EQ(st.last_error, prog + " exited with status 1: Failed to connect to bus: No such file");
  EXPECT_EQ(read("runs"), "x\n");
}

TEST_F(SleepInhibitorTest, AMissingProgramIsReported) {
  const std::string prog = (dir_ / "no-such-inhibit").string();
  SleepInhibitor s([] { return true; }, options(prog));
  ASSERT_TRUE(eventually([&] { return s.status().failures == 1; }));
  EXPECT_NE(s.status().last_error.find("no-such-inhibit"), std::string::npos) << s.status().last_error;
  EXPECT_FALSE(s.status().held);
}

TEST_F(SleepInhibitorTest, AllowIdleSleepNeverStartsOne) {
  const std::string prog = script("inhibit", "echo x > \"$(dirname \"$0\")/args\"\nexec sleep 1000\n");
  SleepInhibitorOptions o = options(prog);
  o.enabled = false;
  SleepInhibitor s([] { return true; }, o);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(fs::exists(dir_ / "args"));
  EXPECT_FALSE(s.status().enabled);
  EXPECT_FALSE(s.status().held);
}

}  // namespace
}  // namespace splash::app
