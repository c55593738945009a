"""The comparison of several methods on one model and data set: each fit's cost estimated and chosen under a time
budget, each finished fit kept for a rerun, and the report that compares them."""
