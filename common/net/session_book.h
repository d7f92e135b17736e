// The server's memory of control-plane sessions (common/net/auth_proof.h):
// which call proofs it accepted, so none is accepted twice, kept per
// credential so that one credential's traffic can only ever push out its own
// sessions. Pure: no clock, no lock, no I/O; the caller (RpcAuth) passes the
// time and holds the lock.
//
// A session is created by its first verified call (never by a Hello, which
// proves nothing) and remembers its calls in a sliding window of
// kSeqWindow call numbers above the highest seen, as IPsec's anti-replay
// window does: constant memory however many calls a session makes.
//
//   SessionBook book(SessionLimits{});
//   switch (book.Admit({rank, server_nonce, made, seq}, now)) { case SessionVerdict::kOk: ... }
#ifndef SHARDLINE_COMMON_NET_SESSION_BOOK_H_
#define SHARDLINE_COMMON_NET_SESSION_BOOK_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <unordered_map>

namespace shardline {

// How much of the server one credential may take. A credential is the job
// token (rank -1), one rank's credential, or the reader's (kReaderRank).
// The limits keep a lesser credential (a rank's, the reader's) from hurting
// anyone else; the token is the operator's root secret (it may act as any
// rank), so it has a share of its own, large enough for a world of workers
// that all hold it, and no session rate limit.
struct SessionLimits {
  // Sessions remembered for one rank's or the reader's credential; past it
  // the credential's least recently used session is forgotten (and refused
  // from then on: its client starts a new one). A worker holds one at a
  // time.
  int sessions_per_credential = 64;
  // The same for the token.
  int token_sessions = 8192;
  // Sessions remembered in all for the ranks' and the reader's credentials;
  // a new session past it is refused (kRateLimited), never made room for
  // by forgetting another credential's.
  size_t max_sessions = size_t{1} << 14;
  // New sessions one rank's or the reader's credential may start: a token
  // bucket of this rate and burst. A worker starts one every 5 minutes,
  // `shardline status` one per run.
  double new_sessions_per_second = 20;
  double new_session_burst = 60;
  // Calls that only read (Status) one credential may make in all its
  // sessions: a token bucket. The calls that run the job (Register,
  // Heartbeat) are not limited per call.
  double read_calls_per_second = 200;
  double read_call_burst = 400;
};

// One verified call, as the book needs it.
struct SessionCall {
  int rank = -1;              // the credential's rank (-1 the token, kReaderRank)
  std::string server_nonce;   // the session's identity
  int64_t made_micros = 0;    // when the server made the session's nonce
  int64_t expiry_micros = 0;  // when the session stops being accepted
  uint64_t seq = 0;
  bool read_only = false;  // a call that only reads: rate-limited per credential
};

enum class SessionVerdict {
  kOk,
  kReplayed,     // this (session, seq) was accepted before, or is too far behind
  kForgotten,    // the session was pushed out of its credential's share
  kRateLimited,  // the credential starts sessions (or reads) too fast
};

class SessionBook {
 public:
  // How far below the highest call number of a session a call may arrive
  // (calls of one session run concurrently and overtake each other).
  static constexpr size_t kSeqWindow = 1024;

  explicit SessionBook(SessionLimits limits = {});

  // Accepts `call` at `now_micros` once, or says why not. Only a call whose
  // proof was verified may come here.
  SessionVerdict Admit(const SessionCall& call, int64_t now_micros);

  size_t sessions() const { return total_; }
  size_t sessions_of(int rank) const;

 private:
  struct Session {
    int64_t made_micros = 0;
    int64_t expiry_micros = 0;
    uint64_t top = 0;                 // the highest seq accepted
    std::bitset<kSeqWindow> seen;     // bit d: seq top - d was accepted
    std::list<std::string>::iterator lru;
  };
  struct Bucket {
    double tokens = 0;
    int64_t filled_micros = 0;
    bool started = false;
    // True (and one token spent) if a token is left at `now`.
    bool Take(double rate, double burst, int64_t now_micros);
  };
  struct Credential {
    std::unordered_map<std::string, Session> sessions;
    std::list<std::string> lru;  // front: most recently used
    // Sessions made at or before this were forgotten: refused if unknown,
    // until the last of them would have expired.
    int64_t forgotten_through_micros = -1;
    int64_t forgotten_expiry_micros = -1;
    Bucket new_sessions;
    Bucket calls;
  };

  static bool Accept(Session& s, uint64_t seq);
  void Drop(int rank, Credential& c, std::unordered_map<std::string, Session>::iterator it);
  void DropExpired(int rank, Credential& c, int64_t now_micros);
  // Drops expired sessions of every credential, and credentials (but
  // `keep_rank`'s) left with nothing to remember.
  void DropExpiredEverywhere(int keep_rank, int64_t now_micros);

  const SessionLimits limits_;
  std::map<int, Credential> credentials_;
  size_t total_ = 0;   // every credential's sessions
  size_t tokens_ = 0;  // the token's (rank -1) among them
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_SESSION_BOOK_H_
