#include "common/net/session_book.h"

#include <algorithm>

namespace shardline {

SessionBook::SessionBook(SessionLimits limits) : limits_(limits) {}

bool SessionBook::Bucket::Take(double rate, double burst, int64_t now_micros) {
  if (!started) {
    started = true;
    tokens = burst;
    filled_micros = now_micros;
  }
  if (now_micros > filled_micros) {
    tokens = std::min(burst, tokens + rate * static_cast<double>(now_micros - filled_micros) / 1e6);
    filled_micros = now_micros;
  }
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

size_t SessionBook::sessions_of(int rank) const {
  const auto it = credentials_.find(rank);
  return it == credentials_.end() ? 0 : it->second.sessions.size();
}

bool SessionBook::Accept(Session& s, uint64_t seq) {
  if (seq > s.top) {
    const uint64_t shift = seq - s.top;
    if (shift >= kSeqWindow) {
      s.seen.reset();
    } else {
      s.seen <<= shift;
    }
    s.seen.set(0);
    s.top = seq;
    return true;
  }
  const uint64_t behind = s.top - seq;
  if (behind >= kSeqWindow || s.seen.test(behind)) return false;
  s.seen.set(behind);
  return true;
}

void SessionBook::Drop(int rank, Credential& c, std::unordered_map<std::string, Session>::iterator it) {
  c.lru.erase(it->second.lru);
  c.sessions.erase(it);
  --total_;
  if (rank == -1) --tokens_;
}

void SessionBook::DropExpired(int rank, Credential& c, int64_t now_micros) {
  for (auto it = c.sessions.begin(); it != c.sessions.end();) {
    if (it->second.expiry_micros < now_micros) {
      Drop(rank, c, it++);
    } else {
      ++it;
    }
  }
}

void SessionBook::DropExpiredEverywhere(int keep_rank, int64_t now_micros) {
  // How long an untouched bucket takes to be full again (the limits' alone).
  const double refill_micros = 1e6 * std::max(limits_.new_session_burst / limits_.new_sessions_per_second,
                                              limits_.read_call_burst / limits_.read_calls_per_second);
  for (auto it = credentials_.begin(); it != credentials_.end();) {
    Credential& c = it->second;
    DropExpired(it->first, c, now_micros);
    // A credential is forgotten whole only when nothing of it matters any
    // more: no session, no forgotten session that could come back, and
    // buckets that would be full again.
    const bool idle = static_cast<double>(now_micros - std::max(c.new_sessions.filled_micros, c.calls.filled_micros)) >
                      refill_micros;
    if (it->first != keep_rank && c.sessions.empty() && c.forgotten_expiry_micros < now_micros && idle) {
      it = credentials_.erase(it);
    } else {
      ++it;
    }
  }
}

SessionVerdict SessionBook::Admit(const SessionCall& call, int64_t now_micros) {
  Credential& c = credentials_[call.rank];
  if (call.read_only && !c.calls.Take(limits_.read_calls_per_second, limits_.read_call_burst, now_micros)) {
    return SessionVerdict::kRateLimited;
  }
  const auto found = c.sessions.find(call.server_nonce);
  if (found != c.sessions.end()) {
    Session& s = found->second;
    if (!Accept(s, call.seq)) return SessionVerdict::kReplayed;
    c.lru.splice(c.lru.begin(), c.lru, s.lru);
    return SessionVerdict::kOk;
  }
  // A session this book does not hold: new, unless it is one it forgot.
  if (call.made_micros <= c.forgotten_through_micros) return SessionVerdict::kForgotten;
  const bool token = call.rank == -1;
  const size_t share = static_cast<size_t>(std::max(1, token ? limits_.token_sessions : limits_.sessions_per_credential));
  DropExpired(call.rank, c, now_micros);
  if (!token && c.sessions.size() < share) {
    if (total_ - tokens_ >= limits_.max_sessions) DropExpiredEverywhere(call.rank, now_micros);
    if (total_ - tokens_ >= limits_.max_sessions) return SessionVerdict::kRateLimited;
  }
  if (!token && !c.new_sessions.Take(limits_.new_sessions_per_second, limits_.new_session_burst, now_micros)) {
    return SessionVerdict::kRateLimited;
  }
  while (!c.sessions.empty() && c.sessions.size() >= share) {
    // Push out this credential's least recently used session: only its own.
    const auto oldest = c.sessions.find(c.lru.back());
    c.forgotten_through_micros = std::max(c.forgotten_through_micros, oldest->second.made_micros);
    c.forgotten_expiry_micros = std::max(c.forgotten_expiry_micros, oldest->second.expiry_micros);
    Drop(call.rank, c, oldest);
  }
  c.lru.push_front(call.server_nonce);
  Session& s = c.sessions[call.server_nonce];
  s.made_micros = call.made_micros;
  s.expiry_micros = call.expiry_micros;
  s.top = call.seq;
  s.seen.set(0);
  s.lru = c.lru.begin();
  ++total_;
  if (token) ++tokens_;
  return SessionVerdict::kOk;
}

}  // namespace shardline
