# Cluster files: forward_ms = inf was accepted (nan was refused); gpus_per_node = 1e9
# planned "8e-09 decode threads" in columns that ran together; nodes = 2^63-1
# overflowed to "-2"; `--gpus 1000000000` said "expected GPU counts separated by
# commas" when the real limit was a hidden 10^8. Now: documented ranges, errors at
# file:line:col, and --gpus names its limit.
source "$(dirname "$0")/../lib.sh"
c=$src/tests/cli/data/plan_cluster.toml
r=$src/recipes/quickstart/tsm_motion.toml
line_of() { grep -n "$1" "$2" | head -1 | cut -d: -f1; }
sed 's/^forward_ms = 100.0/forward_ms = inf/' "$c" >inf.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster inf.toml
expect_out "inf.toml:$(line_of "^forward_ms" inf.toml):1: error: 'forward_ms' in [[gpu.profile]]"
sed 's/^optimizer_ms = 5.0/optimizer_ms = -inf/' "$c" >ninf.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster ninf.toml
expect_out "ninf.toml:$(line_of '^optimizer_ms' ninf.toml):"
sed 's/^gpus_per_node = 2/gpus_per_node = 1000000000/' "$c" >gpn.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster gpn.toml --gpus 8
expect_out "gpn.toml:$(line_of "^gpus_per_node" gpn.toml):1: error: 'gpus_per_node' in [cluster]"
expect_no_out "decode thread"
sed 's/^nodes = 4/nodes = 9223372036854775807/' "$c" >nodes.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster nodes.toml
expect_out "nodes.toml:$(line_of "^nodes" nodes.toml):1: error: 'nodes' in [cluster]"
expect_no_out " -2 "
sed 's/^bandwidth_GBps = 0.5/bandwidth_GBps = inf/' "$c" >bw.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster bw.toml
expect_out "bw.toml:$(line_of '^bandwidth_GBps' bw.toml):"
# The largest cluster a file may describe plans without overflow.
sed 's/^nodes = 4/nodes = 100000/; s/^gpus_per_node = 2/gpus_per_node = 1024/' "$c" >max.toml
# (10^8 GPUs x 32 clips: a global batch of 3.2e9, computed without overflow, which the
# 4,000 training clips of the recipe cannot fill: one line, exit 2.)
expect_rc 2 -- "$vexp" plan "$r" --cluster max.toml --gpus 8,100000000
expect_out "fewer than one global batch of 3200000000"
expect_rc 0 -- "$vexp" plan "$r" --cluster max.toml --gpus 8,64
expect_no_out " -"
expect_rc 2 -- "$vexp" plan "$r" --cluster "$c" --gpus 1000000000
expect_out "--gpus '1000000000': '1000000000' is out of range: a GPU count is 1 to 100000000"
expect_rc 2 -- "$vexp" plan "$r" --cluster "$c" --gpus 8,x
expect_out "expected GPU counts separated by commas"
no_crash
exit 0
