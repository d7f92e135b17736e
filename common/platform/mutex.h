// The mutex, lock and notification every shardline component uses: Abseil's,
// plus what ThreadSanitizer needs to see them.
//
// Debian's libabsl is not built with TSan annotations: absl::Mutex orders
// threads through futexes and atomics inside an uninstrumented library, so
// under -fsanitize=thread every access it guards looks like a race. With
// SHARDLINE_TSAN (CMake option SHARDLINE_TSAN), these wrappers tell TSan
// what the mutex does - a release before each unlock and wait, an acquire
// after each lock and wake-up, and both around each evaluation of a wait
// condition (Abseil may evaluate it on the unlocking thread). Without it
// they compile to the bare absl calls.
//
// The API is absl's, so code reads the same:
//   shardline::Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   { shardline::MutexLock lock(&mu_); mu_.Await(absl::Condition(&ready)); }
#ifndef SHARDLINE_COMMON_PLATFORM_MUTEX_H_
#define SHARDLINE_COMMON_PLATFORM_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#if defined(SHARDLINE_TSAN)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace shardline {

namespace mutex_internal {
#if defined(SHARDLINE_TSAN)
inline void Acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
inline void Release(const void* p) { __tsan_release(const_cast<void*>(p)); }
#else
inline void Acquire(const void*) {}
inline void Release(const void*) {}
#endif
}  // namespace mutex_internal

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    mutex_internal::Acquire(this);
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mutex_internal::Release(this);
    mu_.Unlock();
  }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() { mu_.AssertHeld(); }

  // Releases the mutex until `cond` holds, then holds it again.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(cond, absl::InfiniteFuture());  // absl: an infinite deadline never expires
  }
  // The same, giving up at `deadline` / after `timeout`; returns whether
  // `cond` holds. The mutex is held again either way.
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Guarded guarded{this, &cond};
    const absl::Condition condition = guarded.condition();  // built before the release
    mutex_internal::Release(this);
    const bool met = mu_.AwaitWithDeadline(condition, deadline);
    mutex_internal::Acquire(this);
    return met;
  }
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(cond, absl::Now() + timeout);
  }

 private:
  // `cond`, evaluated between an acquire and a release: Abseil evaluates
  // it on whichever thread holds the mutex at the time - often the one
  // unlocking it, after that thread's own release - and the waiter, once
  // woken, must see those reads as before its next writes.
  struct Guarded {
    const Mutex* mu;
    const absl::Condition* cond;
    static bool Eval(Guarded* g) {
      mutex_internal::Acquire(g->mu);
      const bool met = g->cond->Eval();
      mutex_internal::Release(g->mu);
      return met;
    }
    absl::Condition condition() { return absl::Condition(&Guarded::Eval, this); }
  };

  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

// absl::Notification: what happened before Notify() happens before every
// return that saw it.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    mutex_internal::Release(this);
    n_.Notify();
  }
  bool HasBeenNotified() const {
    const bool notified = n_.HasBeenNotified();
    if (notified) mutex_internal::Acquire(this);
    return notified;
  }
  void WaitForNotification() const {
    n_.WaitForNotification();
    mutex_internal::Acquire(this);
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    const bool notified = n_.WaitForNotificationWithTimeout(timeout);
    if (notified) mutex_internal::Acquire(this);
    return notified;
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    const bool notified = n_.WaitForNotificationWithDeadline(deadline);
    if (notified) mutex_internal::Acquire(this);
    return notified;
  }

 private:
  absl::Notification n_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_MUTEX_H_
