# Extra ctest registrations (scripts, node/python comparisons) and per-test link additions.
# Each area keeps its own delimited block.
