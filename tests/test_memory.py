"""Page modes of kernel buffers and the memory and platform facts a point's meta records, on this machine."""

import mmap

import numpy as np
import pytest

from movebench.core import memory

MiB = 1 << 20
THP_AVAILABLE = memory.system_facts()["thp_enabled"] in ("always", "madvise")


@pytest.mark.parametrize("mode", memory.MEMORY_MODES)
def test_allocate_gives_touched_arrays_of_the_shape_and_dtype(mode):
    array = memory.allocate((3, 5), "float64", mode, fill=2.5)
    assert array.shape == (3, 5) and array.dtype == np.float64 and array.flags.c_contiguous
    assert array.flags.writeable and (array == 2.5).all()


def test_4k_mode_is_page_aligned_without_huge_pages():
    array = memory.allocate(4 * MiB, mode="4k")
    facts = memory.buffer_facts(array)
    assert facts["address_mod_4k"] == 0 and facts["nbytes"] == 4 * MiB
    assert facts["huge_page_bytes"] == 0


@pytest.mark.skipif(not THP_AVAILABLE, reason="transparent huge pages are off on this machine")
@pytest.mark.parametrize("nbytes", [MiB, 4 * MiB, 3 * MiB])
def test_thp_mode_starts_on_a_huge_page_and_gets_huge_pages(nbytes):
    array = memory.allocate(nbytes, mode="thp")
    facts = memory.buffer_facts(array)
    assert facts["address_mod_2m"] == 0
    # the kernel may refuse a huge page under memory pressure; on an idle test machine it does not
    assert facts["huge_page_bytes"] == nbytes


def test_numpy_mode_records_what_numpy_did():
    small = memory.allocate(MiB, mode="numpy")
    assert memory.buffer_facts(small)["huge_page_bytes"] == 0  # numpy advises huge pages from 4 MiB only


def test_memory_facts_for_a_meta():
    facts = memory.memory_facts("4k", {"send": memory.allocate(4096), "recv": memory.allocate(8192)})
    assert facts["memory_mode"] == "4k" and facts["page_size"] == mmap.PAGESIZE
    assert facts["huge_page_size"] >= facts["page_size"]
    assert facts["thp_enabled"] in (None, "always", "madvise", "never")
    assert set(facts["buffers"]) == {"send", "recv"} and facts["buffers"]["recv"]["nbytes"] == 8192
    assert isinstance(facts["allocator_env"], dict)


def test_allocator_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    monkeypatch.setenv("UNRELATED", "x")
    env = memory.system_facts()["allocator_env"]
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "MALLOC_ARENA_MAX": "2"}


def test_sysfs_choice_is_the_bracketed_word(tmp_path):
    (tmp_path / "enabled").write_text("always [madvise] never\n")
    assert memory._setting(tmp_path / "enabled") == "madvise"
    assert memory._setting(tmp_path / "missing") is None


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="memory mode 'huge': use one of 4k, thp, numpy"):
        memory.allocate(10, mode="huge")


@pytest.mark.parametrize("mode", memory.MEMORY_MODES)
def test_allocate_bytes_gives_a_touched_writable_byte_view(mode):
    view = memory.allocate_bytes(10_000, mode, fill=7)
    assert isinstance(view, memoryview) and view.format == "B" and view.nbytes == 10_000
    assert not view.readonly and view.tobytes() == bytes([7]) * 10_000
    assert memory.buffer_facts(view)["nbytes"] == 10_000


def test_allocate_bytes_and_allocate_place_memory_alike():
    """The bytes the streaming kernels take and the arrays bcast takes are the same mappings."""
    for view, array in ((memory.allocate_bytes(4 * MiB, "4k"), memory.allocate(4 * MiB, mode="4k")),):
        assert memory.buffer_facts(view)["address_mod_4k"] == memory.buffer_facts(array)["address_mod_4k"] == 0
        assert memory.buffer_facts(view)["huge_page_bytes"] == memory.buffer_facts(array)["huge_page_bytes"] == 0
    if THP_AVAILABLE:
        view = memory.allocate_bytes(3 * MiB, "thp")
        facts = memory.buffer_facts(view)
        assert facts["address_mod_2m"] == 0 and facts["huge_page_bytes"] == 3 * MiB


def test_address_is_where_the_bytes_are():
    array = memory.allocate(64, mode="4k")
    view = memoryview(array)
    assert memory.address(view) == memory.address(array) == array.ctypes.data
    assert memory.address(view[8:]) == array.ctypes.data + 8


def test_meta_platform_is_platform_platform_without_its_cost():
    """envinfo.platform_name builds platform.platform()'s string from uname and confstr (10 ms cheaper per point)."""
    import platform

    from movebench.core import envinfo

    assert envinfo.platform_name() == platform.platform()
    assert envinfo.capture()["platform"] == platform.platform()
