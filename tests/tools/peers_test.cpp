// SPDX-License-Identifier: BSD-3-Clause
// datperf's readers of its peers' outputs: the rows they must find, and a
// clear error (not a wrong number) when the output is not what they expect.
// The samples are the programs' real formats (perftest 4.5, fabtests 1.17,
// dapl2-utils 2.1).
#include "../../tools/datperf/peers.hpp"

#include <gtest/gtest.h>

namespace {

using datperf::parse_dtest_pingpong;
using datperf::parse_fi_bw;
using datperf::parse_fi_pingpong;
using datperf::parse_perftest;

const char kWriteLat[] =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
    "99% percentile[usec]   99.9% percentile[usec] \n"
    " 2       2000          12.31          310.52       13.71              14.02          3.10            "
    "20.12                  150.33\n"
    "---------------------------------------------------------------------------------------\n";

const char kWriteBw[] = "---------------------------------------------------------------------------------------\n"
                        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
                        " 65536      1000             2757.96            2757.93\t\t   0.044127\n"
                        "---------------------------------------------------------------------------------------\n";

TEST(PeersParse, PerftestLatencyIsTheTypicalColumn) {
    double us = 0, mbs = 0;
    std::string error;
    ASSERT_TRUE(parse_perftest(kWriteLat, true, 2, &us, &mbs, &error)) << error;
    EXPECT_DOUBLE_EQ(us, 13.71);
    EXPECT_DOUBLE_EQ(mbs, 2 / 13.71);
}

TEST(PeersParse, PerftestBandwidthIsMessageRateTimesSize) {
    double us = 0, mbs = 0;
    std::string error;
    ASSERT_TRUE(parse_perftest(kWriteBw, false, 65536, &us, &mbs, &error)) << error;
    // 0.044127 Mpps x 65536 B: 10^6 B/s, not the MiB/s of its MB/sec columns.
    EXPECT_NEAR(mbs, 2891.91, 0.01);
}

TEST(PeersParse, PerftestWithoutTheRowIsAnError) {
    double us = 0, mbs = 0;
    std::string error;
    EXPECT_FALSE(parse_perftest(kWriteBw, false, 4096, &us, &mbs, &error));
    EXPECT_NE(error.find("no row for 4096"), std::string::npos) << error;
    EXPECT_FALSE(parse_perftest("Couldn't connect to 10.0.0.1:18515\n", true, 2, &us, &mbs, &error));
    EXPECT_NE(error.find("Couldn't connect"), std::string::npos) << error;
    // A latency reader given a bandwidth table finds no t_typical column.
    EXPECT_FALSE(parse_perftest(kWriteBw, true, 65536, &us, &mbs, &error));
    EXPECT_NE(error.find("t_typical"), std::string::npos) << error;
}

TEST(PeersParse, DtestPingPongLine) {
    double us = 0, mbs = 0;
    std::string error;
    const char out[] = "1234 RDMA WRITE PINGPONG without DATA CHECK\n\n"
                       "1234: RDMA write PingPong: (1000 x 4096) Total 48000.00 us: latency 24.00 us, BW 170.67 MB/s\n"
                       "\n1234: DAPL Test Complete. PASSED\n";
    ASSERT_TRUE(parse_dtest_pingpong(out, &us, &mbs, &error)) << error;
    EXPECT_DOUBLE_EQ(us, 24.0);
    EXPECT_NEAR(mbs, 4096 / 24.0, 1e-9);
    EXPECT_FALSE(parse_dtest_pingpong("1234 Error dat_ia_open: DAT_PROVIDER_NOT_FOUND\n", &us, &mbs, &error));
    EXPECT_NE(error.find("DAT_PROVIDER_NOT_FOUND"), std::string::npos) << error;
}

TEST(PeersParse, FiBwLine) {
    double mbs = 0;
    std::string error;
    ASSERT_TRUE(parse_fi_bw("fi_bw: op=write size=65536 iters=4096 seconds=0.021070 MB/s=12441.8\n", &mbs, &error))
        << error;
    EXPECT_DOUBLE_EQ(mbs, 12441.8);
    EXPECT_FALSE(parse_fi_bw("datperf-fi-bw: fi_getinfo: No data available (-61)\n", &mbs, &error));
    EXPECT_NE(error.find("fi_getinfo"), std::string::npos) << error;
}

TEST(PeersParse, FiPingpongRowBySize) {
    double us = 0, mbs = 0;
    std::string error;
    const char out[] = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
                       "64      1k      =1k      125k        0.02s      7.33       8.73       0.11\n"
                       "4k      1k      =1k      7.8m        0.03s    273.07      15.00       0.07\n";
    ASSERT_TRUE(parse_fi_pingpong(out, 4096, &us, &mbs, &error)) << error;
    EXPECT_DOUBLE_EQ(us, 15.0);
    EXPECT_DOUBLE_EQ(mbs, 273.07);
    EXPECT_FALSE(parse_fi_pingpong(out, 1, &us, &mbs, &error));
}

TEST(PeersParse, InterfaceOfLoopback) {
    EXPECT_EQ(datperf::interface_of("127.0.0.1"), "lo");
    EXPECT_EQ(datperf::interface_of("not an address"), "");
}

} // namespace
