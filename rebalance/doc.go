// Package rebalance plans a resize and moves the data of each owner to its new shard while
// the application keeps reading and writing, with nothing lost and nothing duplicated.
//
// It is a package of its own rather than part of package shard because it serves operators,
// not the lookup path: it has its own vocabulary (a [Store] the application implements, a
// [Migration], its [Mode]s and [Mark]s), it does I/O through that Store, and it uses
// packages shard and pool only through their exported API (the [shard.Sharder] interface,
// and the tables of rings, partitions, tries and directories), so an application that only
// routes keys never links it.
//
// # Planning
//
// [PlanKeys] and [Moves] walk a set of keys and report, for two sharders (before and after a
// resize), how many keys go from each shard to each shard (a [Plan]'s [Flow]s) and which keys
// move; [PlanOwners] weighs each owner by its rows or bytes. [PlanPartitions] and [PlanLeaves]
// answer the same question for a partition table and for the leaves of a trie without walking
// any key, and [PlanRing] and [PlanPoolRing] for rings: the sharding lecture's [003] "only
// contiguous arcs move", as a short list of hash ranges (at most v arcs when a shard of v
// points joins: v ranges, v+1 when one arc crosses position 0). Plans are sparse: their
// memory grows with the keys, partitions, leaves or ranges planned, whatever the shard
// numbers.
//
// # Capacity
//
// [PlanCapacity] answers the rebalancing post's [004] capacity question for a [Layout] (what
// each shard holds and what a resize moves, from the strategy itself: [OwnerLayout],
// [SampleLayout], [PartitionLayout]): when the fullest shard reaches the threshold (70-80%),
// the least count that brings the total under 50% and lasts until new hardware can arrive, and
// what the resize moves from each shard to each shard, and how long at a measured copy rate.
//
// # Moving
//
// A [Migration] follows the two ways of the rebalancing post [004] ("Rebalancing data when
// sharding"):
//
//   - [Async]: a mover ([Migration.Run]) walks the owners; for each one whose shard changes it
//     copies the owner's rows from the old shard to the new one, checks that the new shard
//     holds them ([Store].Count on both), marks the owner, then deletes the old copy. Until an
//     owner is marked, its reads and writes go to the old shard.
//   - [Lazy]: the new layout is used at once; the first read or write of an owner that has
//     not moved yet moves it first. Run is then a sweep for the owners nobody asked for.
//
// A [RangeMigration] moves a range plan range by range, through a [RangeStore] that can copy,
// count and delete a range of positions; [Repin] moves single owners of a [shard.Directory]
// by writing their entries (pin a hot owner, drain a shard in batches). Both are Migrations
// underneath, with the same discipline.
//
// Reads and writes go through [Migration.Do], which holds a per-owner lock shared with other
// accesses and exclusive with that owner's move, so a write is never lost in, or left behind
// by, a move. Every step is idempotent and the per-owner [Mark] (the rebalancing post's [004]
// messages_rebalanced flag) is durable in the application's Store, so after a crash at any
// point a new Migration with the same ID resumes where the old one stopped.
//
// # Nothing is deleted before its copy is seen
//
// An old copy is deleted only after the new shard was counted to hold the owner's rows
// (as many as the old shard right after a copy; at least as many as remain of the old copy
// when a crashed move resumes): if a shard lost data between a
// crash and the restart (a file deleted or truncated, a lost log, an older backup restored),
// the move stops with an error wrapping [ErrCopyMismatch] or [ErrCopyLost] that names the
// shard, and the old copy stays.
//
// # Marks belong to one migration
//
// Marks are keyed by the migration's ID, so a later migration never reads the marks of an
// earlier one. Once [Migration.Finish] has succeeded and every process routes by the new
// sharder alone (the configuration no longer names the migration), the application deletes the
// marks of that ID — the rebalancing post's [004] "reset the flag so you do not forget it next
// time". Never delete them earlier: an unmarked owner is read from its old shard, and moving
// it again would copy the empty old shard over its data.
//
// Finish is durable over a Store that is a [FinishRecorder] (the sqlstore module's is): a
// process that restarts while the configuration still names the migration makes its
// Migration again, which reads the record, routes by the after sharder alone (an owner
// created after Finish has no mark, and is not read from its old shard) and refuses Run
// ([ErrFinished]). Over any other Store, only the value that finished knows it: until every
// process routes by the after sharder alone, no process may make a Migration of that ID
// again, or a new owner written after Finish is read from its old shard, and a Run copies
// that shard over its rows.
//
// The per-owner locks of a Migration are in-process, shared by every Migration value of one
// ID in one process: a mover started twice by mistake, or a mover that resumes after an
// error with a new value while the application keeps calling Do on the first, waits for the
// other value's accesses and moves instead of deleting a write that landed between its
// count and its mark. Every process that reads or writes owners being moved must do so in
// the process that moves them; for many processes, use [Shared], whose fences are kept on
// the shards. Over a Store that is a [MoverLock] (the sqlstore module's is) a second Run is
// also refused while the first runs, in any process; and over any Store, Copy refuses to
// copy a source that another mover deleted ([ErrSourceEmpty]), the sqlstore's refuses to copy
// over rows its destination holds that no copy of its own wrote, or that changed since
// ([ErrStrayRows]: the other mover's, served there already, or a write routed by another
// plan or another owner's access), and the Migration then finds that mover's mark. Over a
// [CheckedDeleter] (the sqlstore's is) the old copy is deleted only as it was when compared
// with the new one: a write there from a process that holds none of the mover's locks
// stops the move with [ErrCopyMismatch], deleting nothing, whether it came before the
// comparison or after. Over a [ProcessBinder] (the sqlstore's is) one process at a time may
// use the migration: a second process's Do, Run or Finish returns [ErrOtherProcess] while
// the first routes by it, moves it, or did so within [ProcessWindow], and a mover is
// refused while another process routes. Without one, nothing makes two processes that each
// move or write owners of one Migration safe: their locks are not each other's, a read in
// one may miss what the other moved, and an UPDATE after the deletion changes no row.
//
// # Across processes
//
// A [Shared] migration holds when application processes and a mover share nothing but the
// databases (Redis Cluster's MIGRATING/IMPORTING slots and ASK redirects [redis cluster spec],
// with the check moved into the database transaction). Locks in a process, or in a control
// database, cannot protect a write from a process that does not hold them: a process that was
// partitioned away, routes by an old placement or lost its lease still holds a connection to
// the shard. So the state that decides whether a shard serves an owner now, its [Fence]
// (Serving, Importing, Moved), is kept on that shard, and a [SharedStore] reads it in the
// transaction that reads or writes the owner's rows, holding the owner shared against a
// fence change on that shard (an advisory lock on PostgreSQL, the write lock on SQLite); the
// mover changes a fence holding the owner exclusive, so the change waits for the accesses
// under way and every later access sees it. What holds, whatever the processes believe:
//
//   - a write lands only on a shard whose fence serves the owner, and the old shard is fenced
//     Moved before the tail of the copy is read, so no acknowledged write is left behind;
//   - the old shard records every change of an owner's rows while the mover copies them
//     (its fence says Exporting: it still serves the owner), and the mover replays them on
//     the new shard, so an UPDATE or DELETE of a row already copied is not lost;
//   - the new shard serves the owner only after its copy was compared by content with the
//     fenced old shard (the rows and a digest of them, SharedStore.Sums), and the old copy is
//     deleted only after that; a copy that differs stops the move, naming the first key
//     that differs, and the old shard serves the owner again;
//   - [Shared.Do] routes by the fences alone, reading no mark: moved on the old shard sends it
//     to the new one, and while neither serves the owner (the tail, a few ms) it waits up to
//     a bound, then says so;
//   - one mover at a time, enforced by the data: a mover's Run first claims the migration
//     ([MoverLock]); the control database refuses an older election epoch, and a second
//     mover of the same epoch while the first's lease runs ([ErrMoverRunning], naming it).
//     The store issues the fencing token itself, one more than the last, and records it on
//     every shard, so no two movers ever hold one token and none is left at a default;
//   - every write a mover makes (fences, marks, chunks, whole-owner copies, deletions)
//     carries that token, and the shard written refuses it, in the same transaction, once it
//     has seen a newer one ([ErrFenced]): a mover that lost its election, or stalled past
//     its lease, changes nothing once a newer one has claimed. Rows are written only where
//     the owners are fenced by the migration: copies into shards that import them,
//     deletions where they are fenced;
//   - a shard knows which placement it serves ([Placement]: the migration and fingerprints
//     of its sharders, recorded by the claim), and refuses an access routed by another
//     ([ErrPlacement]), also for an owner it never held; a claim is refused while the
//     shards serve an unfinished migration, or one whose after sharder is not the new
//     before (the control database decides first: of two migrations claimed at once, one
//     is refused before it touches a shard);
//   - [Shared.Finish] finishes only when every owner given is done, no shard holds rows of
//     an owner that the after sharder places elsewhere ([OwnerLister], part of every
//     SharedStore): an owner left out of the list given to Run and Finish (created after it
//     was made) is named, not stranded, and no owner is fenced part way ([FenceLister]);
//   - once a migration is finished, an owner's old shard refuses an access routed there by a
//     process that has not heard (Placement.Leaving), even for an owner it never held, and
//     that process routes by the after sharder from then on;
//   - an access routed by the after sharder alone, its process holding the migration
//     finished (Placement.Arriving: Do once finished, a router that reads the migration done
//     in its record), runs only on a shard that serves that very migration finished: the
//     next migration's accesses before its mover claims are accepted only as routed by its
//     before sharder, where every owner still is, so a record that says done of a
//     migration no mover ran is refused, not followed; where a Finish is recorded on some
//     shards and not yet on others, Do waits up to FenceWait, then says so;
//   - the copy goes in chunks, each its own short transaction, while the old shard serves the
//     owner, so an owner is served by no shard only for the tail, whatever its size;
//   - owners of one pair of shards move in groups: one fence change, one count and one chunk
//     of tails for the whole group, so the window holds a few statements whatever the group's
//     size, and small owners share their chunks (a statement for many owners, not one each).
//
// The states of one owner moving from shard A to shard B, who may act in each, and what the
// storage refuses (the fences are (A, B); T is the claim's token):
//
//	step                  fences (A, B)                    who acts               the shards refuse
//	claim                 unchanged                        one mover              an older epoch; a live lease of another mover;
//	                                                                              every write of a token older than T
//	1 fence B importing   (serving, serving) -> (serving,  the mover of T         accesses of the owner on B
//	                      importing); B moved by an
//	                      earlier migration also
//	2 fence A exporting   -> (exporting, importing)        the application on A   (A records every change of the owner's rows)
//	3 copy chunks A -> B, (exporting, importing)           the application on A;  chunks and replays into B unless importing
//	  replay the changes                                   the mover into B       by this migration; a token older than T
//	4 fence A moved       -> (moved, importing)            nobody on A or B       every access of the owner (Do waits)
//	5 replay, compare     (moved, importing)               the mover into B       as in step 3; a mismatch or an error:
//	  the sums                                                                    A exporting again (serving)
//	6 commit B serving    -> (moved, serving)              the application on B   accesses on A; copies into B
//	7 delete on A         (moved, serving)                 the mover on A         deletions unless A is fenced by this migration
//	8 mark done           control database                 the mover              marks of a token older than T
//	Finish                shards record it finished        any process, all done, accesses routed to an owner's old shard;
//	                                                       no owner left out      before: Arriving accesses (after sharder);
//	                                                                              after: Arriving accesses of another migration
//	                                                                              (next: a claim of a migration that does
//	                                                                              not start at this one's after sharder)
//
// Whatever runs between two steps: a second mover is refused at its claim; a mover replaced
// by a newer claim is refused at its next write, on whichever shard; a process routing by an
// old or wrong placement is refused by the fence or by the placement on the shard it reaches;
// a write of the application lands only where the fence serves the owner. A step that fails
// leaves the fences as the table says, and the next Run resumes from them.
//
// Electing one mover and publishing the placement are left to a coordinator (the coord
// module keeps both in etcd); the fences make a wrong or late coordinator cost availability,
// never data. The sqlstore module implements SharedStore over database/sql for SQLite and
// PostgreSQL.
//
// [004], the rebalancing post, is «Ребалансировка данных при шардинге», a Russian blog post;
// package shard's documentation lists the sources.
//
// [redis cluster spec]: https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/
package rebalance
