"""Messages that say what to do: a maps file from a newer OLAS is named as such (not "damaged"),
and ``mixing=None`` suggests ``mixing=()`` rather than ``mixing=('None',)``."""

import pytest
import torch

from olas_utils import __version__
from olas_utils.extract import _mixing_keys
from olas_utils.maps import OLAMaps, _version_tuple


def test_version_order_by_hand():
    assert _version_tuple("0.12.3rc1") == (0, 12, 3)
    assert _version_tuple("1.0") == (1, 0)
    assert _version_tuple("2.0.0") > _version_tuple("1.9.9") > _version_tuple(__version__)


def test_a_maps_file_from_a_newer_version_says_upgrade(tmp_path):
    path = tmp_path / "maps.pt"
    torch.save({"maps": {}, "library_version": "99.0.0", "a_field_of_the_future": 1}, path)
    with pytest.raises(ValueError, match=r"newer OLAS \(99\.0\.0\).*upgrade"):
        OLAMaps.load(path)


def test_mixing_none_suggests_an_empty_tuple():
    with pytest.raises(TypeError, match=r"mixing=\(\)") as e:
        _mixing_keys(None)
    assert "'None'" not in str(e.value)
