# vexp check accepted dist.batch_per_gpu = 1000000000, which vexp run then refused
# ("fewer than one global batch"). check now says so, at the batch_per_gpu value,
# wherever the dataset counts its clips: synthetic data and a Kinetics list.
source "$(dirname "$0")/../lib.sh"
expect_rc 2 -- "$vexp" check tiny.toml --set dist.batch_per_gpu=1000000000
expect_out "--set dist.batch_per_gpu=1000000000: error: the training split has 48 clips, fewer than one global batch of 1000000000"
sed 's|^batch_per_gpu = .*|batch_per_gpu = 49|' tiny.toml >big_batch.toml
line=$(grep -n '^batch_per_gpu = ' big_batch.toml | cut -d: -f1)
expect_rc 2 -- "$vexp" check big_batch.toml
expect_out "big_batch.toml:$line:1: error: the training split has 48 clips, fewer than one global batch of 49"
expect_rc 2 -- "$vexp" check tiny.toml --set dist.accum_steps=7
expect_out "fewer than one global batch of 56 (dist.world_size 1 x batch_per_gpu 8 x accum_steps 7)"
expect_rc 0 -- "$vexp" check tiny.toml --set dist.batch_per_gpu=48   # exactly one batch is fine
# Kinetics counts its list (three clips here; the videos are not read by check).
mkdir -p k400
printf 'a.mp4 0\nb.mp4 1\nc.mp4 2\n' >k400/train.txt
cp k400/train.txt k400/val.txt
cat >k.toml <<EOF
extends = "$src/recipes/quickstart/tsm_motion_video.toml"
[data.params]
root = "$tmp/k400"
train_list = "train.txt"
val_list = "val.txt"
[dist]
batch_per_gpu = 4
EOF
expect_rc 2 -- "$vexp" check k.toml
expect_out "k.toml:7:1: error: the training split has 3 clips, fewer than one global batch of 4"
expect_rc 0 -- "$vexp" check k.toml --set dist.batch_per_gpu=3
no_crash
exit 0
