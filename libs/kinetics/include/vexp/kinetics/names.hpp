// The names a Kinetics clip's fields become: its file name, its class folder, and
// what may be one. The rules of one path component are vexp::base's
// (path_component_problem): a label or a youtube_id can never reach outside the
// folder it is put in (docs/security.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace vexp::kinetics {

// "{id}_{start:06d}_{end:06d}": the clip's file name without extension, as every
// Kinetics downloader names it.
std::string clip_name(std::string_view youtube_id, int64_t start, int64_t end);
// A time as clip file names write it: at least 6 digits, zero-padded ("000059").
std::string clip_time(int64_t seconds);
// A label as mmaction2 writes it in folder names and lists: quotes removed, spaces as
// underscores ("passing_American_football_(in_game)").
std::string mmaction_name(std::string_view label);
// A label as the official TSM gen_label_kinetics.py writes it: spaces as underscores,
// quotes, parentheses and apostrophes removed.
std::string tsm_name(std::string_view label);

// Why `label` cannot name a class folder ("" when it can): it must be one path
// component as written and as mmaction_name writes it (not empty, no '/', '\\', NUL,
// TAB or other control character, not "." or "..", at most 255 bytes).
std::string label_problem(std::string_view label);
// Why `youtube_id` cannot start a clip's file name ("" when it can): one path
// component without '\\' or spaces, at most 200 bytes.
std::string youtube_id_problem(std::string_view youtube_id);
// Why a split ("train", "val", "") cannot be a folder name ("" when it can; the empty
// split can).
std::string split_problem(std::string_view split);

}  // namespace vexp::kinetics
