// SPDX-License-Identifier: BSD-3-Clause
// The dat.conf(5) grammar, as OFED parses it, and its diagnostics.
#include "dat_conf.hpp"

#include <gtest/gtest.h>

using dat2::parse_dat_conf;

namespace {

const char kGood[] = "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n";

TEST(DatConf, ParsesAnOfedRecord) {
    auto r = parse_dat_conf(kGood, "f");
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 1u);
    const auto &e = r.entries[0];
    EXPECT_EQ(e.ia_name, "ofa-v2-ib0");
    EXPECT_EQ(e.api_kind, 'u');
    EXPECT_EQ(e.api_major, 2u);
    EXPECT_EQ(e.api_minor, 0u);
    EXPECT_FALSE(e.thread_safe);
    EXPECT_TRUE(e.is_default);
    EXPECT_EQ(e.library, "libdaplofa.so.2");
    EXPECT_EQ(e.provider_id, "dapl");
    EXPECT_EQ(e.provider_major, 2u);
    EXPECT_EQ(e.provider_minor, 0u);
    EXPECT_EQ(e.ia_params, "ib0 0");
    EXPECT_EQ(e.platform_params, "");
    EXPECT_EQ(e.file, "f");
    EXPECT_EQ(e.line, 1u);
    EXPECT_TRUE(e.loadable());
}

TEST(DatConf, CommentsBlankLinesAndLineNumbers) {
    std::string text = "# header\n\n   \t\n";
    text += std::string("x u2.0 threadsafe default lib.so p.1.2 \"a\" \"b\" # trailing comment\n");
    auto r = parse_dat_conf(text, "f");
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].line, 4u);
    EXPECT_TRUE(r.entries[0].thread_safe);
    EXPECT_EQ(r.entries[0].provider_major, 1u);
    EXPECT_EQ(r.entries[0].provider_minor, 2u);
}

TEST(DatConf, HashInsideATokenOrQuotesIsText) {
    auto r = parse_dat_conf("a#b u2.0 threadsafe default lib.so p.1.2 \"x # y\" z\n", "f");
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].ia_name, "a#b");
    EXPECT_EQ(r.entries[0].ia_params, "x # y");
    EXPECT_EQ(r.entries[0].platform_params, "z");
}

TEST(DatConf, EscapesInsideQuotes) {
    auto r = parse_dat_conf(R"(a u2.0 threadsafe default "/my libs/x.so" p.1.2 "say \"hi\" \\ ok" "")"
                            "\n",
                            "f");
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].library, "/my libs/x.so");
    EXPECT_EQ(r.entries[0].ia_params, "say \"hi\" \\ ok");
}

TEST(DatConf, CrLfAndNoFinalNewline) {
    auto r = parse_dat_conf(
        "a u2.0 threadsafe default l.so p.1.2 \"\" \"\"\r\nb u2.0 threadsafe default l.so p.1.2 x y", "f");
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 2u);
    EXPECT_EQ(r.entries[1].ia_name, "b");
    EXPECT_EQ(r.entries[1].line, 2u);
}

TEST(DatConf, ProviderIdMayContainDots) {
    auto r = parse_dat_conf("a u2.0 threadsafe default l.so org.example.dapl.3.14 \"\" \"\"\n", "f");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].provider_id, "org.example.dapl");
    EXPECT_EQ(r.entries[0].provider_major, 3u);
    EXPECT_EQ(r.entries[0].provider_minor, 14u);
}

TEST(DatConf, NondefaultAndKernelEntriesAreParsedButNotLoadable) {
    auto r = parse_dat_conf("a u2.0 threadsafe nondefault l.so p.1.2 \"\" \"\"\n"
                            "b k2.0 threadsafe default l.so p.1.2 \"\" \"\"\n",
                            "f");
    ASSERT_EQ(r.entries.size(), 2u);
    EXPECT_FALSE(r.entries[0].loadable());
    EXPECT_FALSE(r.entries[1].loadable());
    EXPECT_EQ(r.entries[1].api_kind, 'k');
}

struct BadLine {
    const char *text;
    const char *field;    // expected field name in the diagnostic ("" = whole line)
    const char *mentions; // a word the message must contain
};

class DatConfBad : public testing::TestWithParam<BadLine> {};

TEST_P(DatConfBad, IsSkippedWithFileLineFieldAndExpectation) {
    const BadLine &b = GetParam();
    std::string text = std::string("# first line\n") + b.text + "\n" + kGood;
    auto r = parse_dat_conf(text, "/etc/x.conf");
    ASSERT_EQ(r.diagnostics.size(), 1u) << b.text;
    const auto &d = r.diagnostics[0];
    EXPECT_EQ(d.file, "/etc/x.conf");
    EXPECT_EQ(d.line, 2u);
    EXPECT_EQ(d.field, b.field);
    EXPECT_NE(d.message.find(b.mentions), std::string::npos) << d.message;
    std::string s = d.to_string();
    EXPECT_EQ(s.rfind("/etc/x.conf:2: ", 0), 0u) << s;
    // The good record after the bad one still loads.
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].ia_name, "ofa-v2-ib0");
    EXPECT_EQ(r.entries[0].line, 3u);
}

INSTANTIATE_TEST_SUITE_P(
    Lines, DatConfBad,
    testing::Values(BadLine{"a u2.0 threadsafe", "default_section", "8 fields"},
                    BadLine{"a", "api_version", "8 fields"},
                    BadLine{"a u2.0 threadsafe default l.so p.1.2 x y extra", "", "after the 8th field"},
                    BadLine{"a 2.0 threadsafe default l.so p.1.2 x y", "api_version", "[u|k]MAJOR.MINOR"},
                    BadLine{"a ux.y threadsafe default l.so p.1.2 x y", "api_version", "u2.0"},
                    BadLine{"a u2 threadsafe default l.so p.1.2 x y", "api_version", "MAJOR.MINOR"},
                    BadLine{"a u2.0 safe default l.so p.1.2 x y", "thread_safety", "'threadsafe' or 'nonthreadsafe'"},
                    BadLine{"a u2.0 threadsafe yes l.so p.1.2 x y", "default_section", "'default' or 'nondefault'"},
                    BadLine{"a u2.0 threadsafe default \"\" p.1.2 x y", "library_path", "library"},
                    BadLine{"a u2.0 threadsafe default l.so dapl2.0 x y", "provider_version", "ID.MAJOR.MINOR"},
                    BadLine{"a u2.0 threadsafe default l.so .2.0 x y", "provider_version", "ID.MAJOR.MINOR"},
                    BadLine{"a u2.0 threadsafe default l.so p.x.0 x y", "provider_version", "ID.MAJOR.MINOR"},
                    BadLine{"\"\" u2.0 threadsafe default l.so p.1.2 x y", "ia_name", "non-empty"},
                    BadLine{"a u2.0 threadsafe default l.so p.1.2 \"unterminated y", "", "unterminated"},
                    BadLine{"a u2.0 threadsafe default l.so p.1.2 \"x\\", "", "backslash"},
                    BadLine{"a u99999999999.0 threadsafe default l.so p.1.2 x y", "api_version", "MAJOR.MINOR"}));

TEST(DatConf, OverlongNameIsRejected) {
    std::string name(256, 'n');
    auto r = parse_dat_conf(name + " u2.0 threadsafe default l.so p.1.2 x y\n", "f");
    ASSERT_EQ(r.diagnostics.size(), 1u);
    EXPECT_EQ(r.diagnostics[0].field, "ia_name");
    EXPECT_TRUE(r.entries.empty());
    name.resize(255);
    r = parse_dat_conf(name + " u2.0 threadsafe default l.so p.1.2 x y\n", "f");
    EXPECT_EQ(r.entries.size(), 1u);
}

TEST(DatConf, NulBytesAndBinaryGarbageNeverCrash) {
    std::string text("a u2.0 threadsafe default l.so p.1.2 x y\n", 41);
    text += std::string("b\0c u2.0 threadsafe default l.so p.1.2 x y\n", 43);
    auto r = parse_dat_conf(text, "f");
    EXPECT_EQ(r.entries.size(), 1u);
    ASSERT_EQ(r.diagnostics.size(), 1u);
    EXPECT_NE(r.diagnostics[0].message.find("NUL"), std::string::npos);

    // Every byte value in every position of a short record.
    std::string base = "a u2.0 threadsafe default l.so p.1.2 \"x\" y\n";
    for (std::size_t pos = 0; pos < base.size(); ++pos) {
        for (int c = 0; c < 256; ++c) {
            std::string t = base;
            t[pos] = static_cast<char>(c);
            auto rr = parse_dat_conf(t, "f");
            EXPECT_LE(rr.entries.size() + rr.diagnostics.size(), 2u);
        }
    }
}

} // namespace
