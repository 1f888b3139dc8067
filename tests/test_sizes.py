import pytest

from movebench.core.sizes import SizeError, expand_sizes, format_size, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [("4KiB", 4096), ("1MiB", 1 << 20), ("2GiB", 2 << 30), ("4kB", 4000), ("1 MB", 10**6), ("512", 512),
     (512, 512), ("1.5KiB", 1536), ("8B", 8), ("1mib", 1 << 20), ("3k", 3000), ("1Ki", 1024)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "4 XB", "-1", "1.3B", "KiB", True, None, [4], -5])
def test_parse_size_rejects_with_a_hint(bad):
    with pytest.raises(SizeError) as err:
        parse_size(bad)
    assert repr(bad) in str(err.value) or "whole number" in str(err.value)


def test_format_size_round_trips():
    for n in (1, 1000, 1024, 4096, 1 << 20, 3 << 30, 1536):
        assert parse_size(format_size(n)) == n
    assert format_size(4096) == "4KiB" and format_size(1536) == "1536B"


def test_expand_range_and_list():
    assert expand_sizes({"from": "1KiB", "to": "8KiB", "factor": 2}) == [1024, 2048, 4096, 8192]
    assert expand_sizes({"from": "1KiB", "to": "5KiB"}) == [1024, 2048, 4096]
    assert expand_sizes(["1MiB", "4KiB", 4096]) == [4096, 1 << 20]
    assert expand_sizes("64KiB") == [65536]
    assert expand_sizes({"from": 1, "to": 100, "factor": 10}) == [1, 10, 100]


@pytest.mark.parametrize(
    "spec", [{"from": "8KiB", "to": "1KiB"}, {"from": 0, "to": 8}, {"from": 1, "to": 8, "factor": 1}]
)
def test_expand_rejects_empty_ranges(spec):
    with pytest.raises(SizeError):
        expand_sizes(spec)


def test_petabytes_parse_and_format():
    assert parse_size("1PiB") == 1024**5 and parse_size("1PB") == 1000**5 and format_size(1024**5) == "1PiB"


@pytest.mark.parametrize("big", [10**23, 1e23, "100000000000000000000000", "2PiB", "1025TiB", 1024**5 + 1])
def test_a_size_above_one_pib_is_refused_naming_the_largest(big):
    with pytest.raises(SizeError) as err:
        parse_size(big)
    assert repr(big) in str(err.value) and "the largest size, 1PiB (1125899906842624 bytes)" in str(err.value)
    with pytest.raises(SizeError):
        expand_sizes({"from": 1, "to": big})


def test_one_pib_is_the_largest_valid_size():
    assert parse_size(1024**5) == parse_size("1PiB") == parse_size("1024TiB") == 1024**5
