#!/usr/bin/env bash
# Per-core decode rates of vexp's loader on Kinetics-sized clips, for a cluster file's
# [cpu] section (clusters/summit.toml uses them; docs/planning.md explains why):
# N synthetic 340x256 H.264 clips of 10 s at 25 fps (x264 medium, one keyframe per clip,
# as tools/bench/data_vs_pyav.py makes them), the same clips as JPEG frame folders
# (vexp data extract-frames, quality 95), and `vexp bench data --threads 1 --split train`
# through recipes/kinetics400/tsm_r50_8f.toml (TSN sampling of 8 frames, multi-scale
# crop to 224^2) on each layout. Writes OUT/data_videos.json and OUT/data_frames.json.
#
#   tools/plan/decode_340x256.sh [VEXP] [OUT] [N]     (defaults build/bin/vexp clusters/summit 8)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
vexp=${1:-$here/build/bin/vexp}
out=${2:-$here/clusters/summit}
n=${3:-8}
recipe=$here/recipes/kinetics400/tsm_r50_8f.toml
work=$(mktemp -d)
trap 'rm -rf "$work" "$out"/data_videos.json.tmp "$out"/data_frames.json.tmp' EXIT
mkdir -p "$work/videos" "$out"
: > "$work/videos/list.txt"
for i in $(seq 0 $((n - 1))); do
  f=$(printf 'c%03d.mp4' "$i")
  ffmpeg -v error -y -f lavfi -i "testsrc2=size=340x256:rate=25,noise=alls=12:allf=t" -ss $((i % 7)) -t 10 \
    -c:v libx264 -preset medium -pix_fmt yuv420p -g 250 -keyint_min 250 -sc_threshold 0 "$work/videos/$f"
  echo "$f $((i % 4))" >> "$work/videos/list.txt"
done
"$vexp" data extract-frames "$work/videos/list.txt" --out "$work/frames" --workers 2 >/dev/null
common=(--split train --threads 1 --repeat 3 --json)
note() {  # adds what was measured and how to a bench data JSON
  /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["layout"]=sys.argv[2]; j["command"]=sys.argv[3]; j["host_cpu"]=sys.argv[4]; j["bytes_per_file_mean"]=float(sys.argv[5]); json.dump(j,open(sys.argv[1],"w"),indent=2)' "$@"
}
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
"$vexp" bench data "$recipe" "${common[@]}" --set "data.params.root=\"$work/videos\"" \
  --set 'data.params.train_list="list.txt"' --set 'data.params.val_list="list.txt"' > "$out/data_videos.json.tmp"
vbytes=$(du -b "$work"/videos/*.mp4 | awk '{s+=$1; n++} END {print s/n}')
note "$out/data_videos.json.tmp" videos "tools/plan/decode_340x256.sh ($n clips of 340x256, 10 s, 25 fps)" "$cpu" "$vbytes"
"$vexp" bench data "$recipe" "${common[@]}" --set "data.params.root=\"$work/frames\"" \
  --set 'data.params.train_list="list_frames.txt"' --set 'data.params.val_list="list_frames.txt"' \
  --set 'data.params.layout="frames"' > "$out/data_frames.json.tmp"
fbytes=$(find "$work/frames" -name '*.jpg' -printf '%s\n' | awk '{s+=$1; n++} END {print s/n}')
note "$out/data_frames.json.tmp" frames "tools/plan/decode_340x256.sh ($n clips of 340x256 as JPEG q95 frames)" "$cpu" "$fbytes"
mv "$out/data_videos.json.tmp" "$out/data_videos.json"
mv "$out/data_frames.json.tmp" "$out/data_frames.json"
grep -h -E '"clips_per_s_per_thread"|"clips_per_cpu_s"' "$out/data_videos.json" "$out/data_frames.json"
