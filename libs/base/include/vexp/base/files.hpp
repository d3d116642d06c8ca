// Files that come from outside are hostile: a FIFO, /dev/zero, a symlink to a device
// or a 4 GB log must give one clear sentence, not a hang, an unbounded read or a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "vexp/base/error.hpp"

namespace vexp::base {

// Limits used across vexp for files it reads whole (documented in docs/security.md).
constexpr std::uint64_t kMaxTextFileBytes = 64ull << 20;    // recipes, sweeps, cluster files, summaries
constexpr std::uint64_t kMaxLogFileBytes = 1ull << 30;      // metrics.jsonl and other logs

// Reads a regular file of at most max_bytes (symlinks followed). Throws Error
// "'PATH' is a FIFO, not a regular file" / "... is N bytes, more than the M allowed" /
// "cannot read 'PATH': REASON". Never blocks on a FIFO or a device.
std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes = kMaxTextFileBytes);
// The same for a file read for a purpose: its errors name it by `role`
// ("cannot read the video list 'PATH': REASON", "the video list 'PATH' is a FIFO, ...").
std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view role);
// The same, "" when the file cannot be read for any reason: for what is only shown
// when it is there (a tool's log after it failed).
std::string read_file_or_empty(const std::string& path, std::uint64_t max_bytes = kMaxTextFileBytes);

// The same file streamed: `chunk` gets its bytes in pieces (up to 64 KiB) as they are
// read, with read_file_bounded's checks and errors (a file that grows past max_bytes
// while it is read is refused too). `on_size`, when given, gets the file's size at open
// (before the first chunk), for a caller that reserves memory. Returns the number of bytes read.
std::uint64_t read_file_chunks(const std::string& path, std::uint64_t max_bytes,
                               const std::function<void(std::string_view)>& chunk,
                               const std::function<void(std::uint64_t)>& on_size = {});

// Why a bounded read failed, for a reader that words its errors itself (the recipe
// reader: "cannot read recipe 'PATH': is a directory").
struct ReadFailure {
  enum class Kind { cannot_read, not_regular, too_big, grew };
  Kind kind = Kind::cannot_read;
  int err = 0;              // cannot_read: errno (open, fstat or read)
  unsigned mode = 0;        // not_regular: st_mode
  std::uint64_t bytes = 0;  // too_big: the size at open; grew: the bytes read when it passed max_bytes
};
// read_file_chunks without throwing (the one implementation both use): nullopt when
// the whole file was read, else why not. A file that grew past max_bytes has had
// some chunks delivered.
std::optional<ReadFailure> try_read_file_chunks(const std::string& path, std::uint64_t max_bytes,
                                                const std::function<void(std::string_view)>& chunk,
                                                const std::function<void(std::uint64_t)>& on_size = {});

// ---- what this process read -------------------------------------------------
// Every file read through read_file_bounded / read_file_chunks (and the recipe
// reader, the checkpoint reader: note_input) is noted by device and inode, so that
// a command can refuse an output that would replace any file it read, whoever
// named it and through whichever link (vexp::rundir::refuse_output).

// Notes `path` (as opened: `dev`, `ino`) as read by this process. Thread-safe.
void note_input(const std::string& path, std::uint64_t dev, std::uint64_t ino);
// Notes `path` by stat (nothing when it does not exist).
void note_input(const std::string& path);
// The name under which this process read the file `path` names (the same device
// and inode, so hard and symbolic links are seen through; the last such name), or ""
// when it read no such file, `path` does not exist, or the name it was read as no
// longer leads to that inode (the file read was deleted and its inode reused).
std::string read_as_input(const std::string& path);

// ---- appending --------------------------------------------------------------
// Logs and records are appended to files in folders that may come from someone
// else: the file must be a regular file of one name. A symbolic link (even to a
// file of the user's) is not followed and a hard link (two names: the other may be
// ~/.bashrc or a checkpoint) is refused, so an append never writes anywhere but the
// file of that name.

// Opens `path` for appending, created with mode 0644 when missing, without
// following a symbolic link and without blocking on a FIFO. Returns the descriptor
// (close-on-exec unless `inherit`), or -1 with errno set: ELOOP (a symbolic link),
// EMLINK (more than one name), EINVAL (not a regular file). Safe in a forked child.
int open_append_fd(const char* path, bool inherit = false) noexcept;
// The reason open_append_fd refused (errno) in words: "it is a symbolic link", ...
std::string append_problem(int err);
// Appends `text` (one write for a short record) to `path` as open_append_fd opens
// it. Throws Error "cannot append to 'PATH': REASON".
void append_file(const std::string& path, std::string_view text);

// Why `path` is not a regular file of at most max_bytes ("" when it is). Does not open it.
std::string regular_file_problem(const std::string& path, std::uint64_t max_bytes);

// "a directory", "a FIFO", "a socket", "a character device", ... for the file type of `st_mode`.
std::string file_kind(unsigned st_mode);

// Why `name` cannot be used as exactly one path component ("" when it can): empty,
// "." or "..", a '/', a NUL, a control character (TAB, newline, ESC ...), or longer
// than 255 bytes.
std::string path_component_problem(std::string_view name);

// True when `inner` lies inside folder `outer` (both made absolute and resolved as far
// as they exist; symlinks in the existing part followed).
bool is_within(const std::filesystem::path& outer, const std::filesystem::path& inner);

// True when `a` and `b` name the same file (hard links and symlinks included) or, when
// one does not exist yet, the same resolved path.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// A folder only this process's user can read, made with mkdtemp under `parent`
// (default: $TMPDIR, or /tmp) as PREFIX_XXXXXX, and removed with everything in it
// when the object goes away. Throws Error naming the parent when it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "vexp", const std::string& parent = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Keep the folder (for example to show it after a failure).
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

// vexp's one atomic writer. Writes `text` to `path` through a private temporary
// file in the same folder (mkstemp: no planted link at a guessable name is
// followed), fsync, a rename, then an fsync of the folder (so the rename itself
// reaches the disk): a reader sees the old file or the new one, never a torn one,
// and a failure leaves the old file as it was. Refuses (Error) when `path` exists
// and is not a regular file. mode: permission bits of the new file. Errors:
// Error "cannot write 'PATH': REASON".
void write_file_atomic(const std::string& path, std::string_view text, unsigned mode = 0644);

}  // namespace vexp::base
