"""-vf's chain text split into filter specs: where a comma ends a filter and where it does not."""

from __future__ import annotations

import pytest

from streamconv.errors import FilterSpecError
from streamconv.chain.chain_string import split_chain
from streamconv.chain.filters import parse_chain


@pytest.mark.parametrize("text, specs", [
    ("edge", ["edge"]),
    ("gaussian:sigma=2,size=5,edge", ["gaussian:sigma=2,size=5", "edge"]),
    ("custom:taps=0,-1,0;-1,5,-1;0,-1,0,sharpen:amount=0.5",
     ["custom:taps=0,-1,0;-1,5,-1;0,-1,0", "sharpen:amount=0.5"]),
    (" box:size=3 , edge ", ["box:size=3", "edge"]),
    ("scale:width=32,height=24,crop:width=16,height=16",
     ["scale:width=32,height=24", "crop:width=16,height=16"]),
    ("custom:file=my\\,weights,edge", ["custom:file=my,weights", "edge"]),  # \, stays a comma
    ("custom:file=a\\,b.npy,normalize=1,box", ["custom:file=a,b.npy,normalize=1", "box"]),
    ("gaussian,gausian", ["gaussian", "gausian"]),  # a misspelt name is still a filter of its own
])
def test_a_comma_starts_a_filter_only_before_a_name(text, specs):
    assert split_chain(text) == specs


def test_split_specs_build_the_stages_of_the_same_filters():
    chain = "gaussian:sigma=2,size=5,custom:taps=0,-1,0;-1,5,-1;0,-1,0,edge"
    stages = parse_chain(split_chain(chain))
    assert [stage.name for stage in stages] == ["gaussian", "custom", "edge"]
    assert stages[0].size == 5 and stages[1].taps[0][1].tolist() == [-1, 5, -1]


@pytest.mark.parametrize("text", ["", "  ", "edge,", ",edge", "box,,edge"])
def test_empty_filters_are_refused(text):
    with pytest.raises(FilterSpecError, match="empty"):
        split_chain(text)
