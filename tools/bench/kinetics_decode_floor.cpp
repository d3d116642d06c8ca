// kinetics_decode_floor VIDEO... [--frames 8] [--rounds 3]
// The CPU time per clip of reading the TSN test frames (segment centres) three
// ways, on this process's one thread, to show how close VideoReader is to what
// lossless decoding allows (docs/data.md, "Benchmark"):
//   all:   libavcodec decoding every frame up to the last wanted one (what a
//          plain reader such as PyAV does);
//   floor: the same, with non-reference frames that are not wanted skipped;
//   vexp:  VideoReader (open, packet index, seek, decode, 8 crops of 224).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "vexp/kinetics/sampling.hpp"
#include "vexp/media/media.hpp"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

namespace {

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Decodes `path` from its first keyframe until every wanted frame came out;
// returns the frames the decoder produced.
int64_t plain_decode(const std::string& path, int64_t T, bool skip_nonref) {
  AVFormatContext* fmt = nullptr;
  if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) < 0) throw std::runtime_error("'" + path + "': cannot open");
  const int s = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (s < 0) {
    avformat_close_input(&fmt);
    throw std::runtime_error("'" + path + "': no video stream");
  }
  const AVCodec* dec = avcodec_find_decoder(fmt->streams[s]->codecpar->codec_id);
  AVCodecContext* c = avcodec_alloc_context3(dec);
  avcodec_parameters_to_context(c, fmt->streams[s]->codecpar);
  c->thread_count = 1;
  AVPacket* pkt = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  int64_t produced = 0;
  std::vector<int64_t> pts;
  if (dec && avcodec_open2(c, dec, nullptr) >= 0) {
    while (av_read_frame(fmt, pkt) >= 0) {
      if (pkt->stream_index == s && pkt->pts != AV_NOPTS_VALUE) pts.push_back(pkt->pts);
      av_packet_unref(pkt);
    }
    std::sort(pts.begin(), pts.end());
  }
  if (!pts.empty()) {
    std::set<int64_t> want;
    for (int64_t i : vexp::kinetics::tsn_test(static_cast<int64_t>(pts.size()), T)) want.insert(pts[i]);
    av_seek_frame(fmt, s, pts.front(), AVSEEK_FLAG_BACKWARD);
    avcodec_flush_buffers(c);
    while (!want.empty() && av_read_frame(fmt, pkt) >= 0) {
      if (pkt->stream_index == s) {
        const bool needed = want.count(pkt->pts) || (pkt->flags & AV_PKT_FLAG_KEY);
        c->skip_frame = skip_nonref && !needed ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
        avcodec_send_packet(c, pkt);
        while (avcodec_receive_frame(c, frame) == 0) {
          ++produced;
          want.erase(frame->best_effort_timestamp);
          av_frame_unref(frame);
        }
      }
      av_packet_unref(pkt);
    }
  }
  av_frame_free(&frame);
  av_packet_free(&pkt);
  avcodec_free_context(&c);
  avformat_close_input(&fmt);
  if (pts.empty()) throw std::runtime_error("'" + path + "': cannot decode");
  return produced;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  int64_t T = 8, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--frames" || a == "--rounds") && i + 1 < argc) {
      (a == "--frames" ? T : rounds) = std::max(1L, std::atol(argv[++i]));
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: kinetics_decode_floor VIDEO... [--frames 8] [--rounds 3]\n");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: kinetics_decode_floor VIDEO... [--frames 8] [--rounds 3]\n");
    return 2;
  }
  vexp::media::quiet_ffmpeg_logs();
  try {
    for (int64_t r = 0; r < rounds; ++r) {
      double t_all = 0, t_floor = 0, t_vexp = 0;
      int64_t n_all = 0, n_floor = 0, n_vexp = 0;
      for (const auto& f : files) {
        double t0 = cpu_s();
        n_all += plain_decode(f, T, false);
        double t1 = cpu_s();
        n_floor += plain_decode(f, T, true);
        double t2 = cpu_s();
        vexp::media::VideoReader v(f);
        const int side = std::min({224, v.width(), v.height()});
        std::vector<uint8_t> buf(static_cast<size_t>(T) * side * side * 3);
        v.read(vexp::kinetics::tsn_test(v.frames(), T),
               {(v.width() - side) / 2, (v.height() - side) / 2, side, side}, side, side, 3, buf.data());
        n_vexp += v.decoded_frames();
        const double t3 = cpu_s();
        t_all += t1 - t0;
        t_floor += t2 - t1;
        t_vexp += t3 - t2;
      }
      const double n = static_cast<double>(files.size());
      std::printf("round %lld, CPU ms per clip (frames decoded): all %.1f (%.1f) | floor %.1f (%.1f) | vexp %.1f (%.1f)"
                  " | all/vexp %.2fx\n",
                  static_cast<long long>(r + 1), 1e3 * t_all / n, static_cast<double>(n_all) / n, 1e3 * t_floor / n,
                  static_cast<double>(n_floor) / n, 1e3 * t_vexp / n, static_cast<double>(n_vexp) / n, t_all / t_vexp);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
