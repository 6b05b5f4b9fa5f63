// Package fdcount counts the file descriptors this process holds, for the
// servers' resource pressure (limit.ResourceConfig.MaxFDs).
//
// The count is the kernel's listing of /proc/self/fd, which costs about
// 0.5 us per open descriptor however it is read (9.1 ms for 19,000 here,
// so about half a second for a million): call it only where a ceiling
// is set, and not often. Open reads the listing with getdents(2) into
// one buffer on the stack and counts the entries: os.ReadDir of the same
// directory took twice as long and allocated 2.9 MB in 38,000 objects for
// 19,000 descriptors (BenchmarkOpen). It imports nothing of corral.
package fdcount
