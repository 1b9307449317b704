"""A broker's address map as the client holds it: `BrokerData.brokerAddrs`, a
`java.util.HashMap<Long, String>` of broker id → address, with Java's iteration order.

REQ-6 (`MQClientInstance.findBrokerAddressInSubscribe`) and OFFSET-7 4.7
(`findBrokerAddressInAdmin`) fall back to the map's *first entry*, so which broker a pull or an
offset query reaches depends on that order. It is neither the ids' order nor the order the
NameServer listed them in: it is HashMap's bucket order. The client's map is the one fastjson
decodes from the route (`TopicRouteData.brokerDatas[].brokerAddrs`): a `new HashMap()` into
which the entries are put in the route's order. `BrokerAddrs` replays those puts on a model of
`java.util.HashMap` (JDK 8 and later, unchanged through 17) and iterates as Java does:

- the hash of a key is `Long.hashCode` = `(int) (value ^ (value >>> 32))`, spread as
  `h ^ (h >>> 16)` (`HashMap.hash`); a key lives in bucket `hash & (capacity − 1)`;
- the table starts at 16 buckets and doubles whenever the size passes 3/4 of the capacity;
  a doubling splits each bucket in two keeping the entries' relative order;
- inside a bucket entries are chained in put order; a chain that reaches 9 entries doubles
  the table while it has fewer than 64 buckets, else becomes a red-black tree bin, whose
  iteration order is its linked order with the tree's root moved to the front.

So for the small non-negative ids brokers use (0 = master), the map iterates in ascending id
order whatever order the route lists them in; ids 16 apart share a bucket (while the table has
16 buckets) and keep their put order there.

Example: ``list(BrokerAddrs([(2, "s2:1"), (0, "m:1")]))`` is ``[0, 2]``, and
``list(BrokerAddrs([(17, "a"), (1, "b"), (16, "c")]))`` is ``[16, 17, 1]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from pullspec.spec.errors import InvalidTypeError, require_range, require_str

#: java.lang.Long's range: a broker id is a Long.
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1

# java.util.HashMap's constants.
_DEFAULT_INITIAL_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_UNTREEIFY_THRESHOLD = 6
_MIN_TREEIFY_CAPACITY = 64


def _int32(value: int) -> int:
    """A Java int cast: the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def long_hash_code(value: int) -> int:
    """`Long.hashCode(value)`: `(int) (value ^ (value >>> 32))`.

    Example: ``long_hash_code(1)`` is 1, ``long_hash_code(-1)`` is 0 (so −1 and 0 share a
    bucket), ``long_hash_code(1 << 32)`` is 1.
    """
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return _int32(unsigned ^ (unsigned >> 32))


def spread_hash(value: int) -> int:
    """`HashMap.hash(key)` of a Long key: its hashCode `h` spread as `h ^ (h >>> 16)`.

    Example: ``spread_hash(3)`` is 3; ``spread_hash(1 << 16)`` is 65537.
    """
    h = long_hash_code(value)
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 16))


class _Node:
    """One HashMap.Node (or TreeNode once `tree` is set): the chain link and the tree links."""

    __slots__ = ("hash", "key", "left", "next", "parent", "prev", "red", "right", "tree")

    def __init__(self, key: int, hash_: int, next_: _Node | None = None) -> None:
        self.key, self.hash, self.next = key, hash_, next_
        self.tree = False
        self.parent: _Node | None = None
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.prev: _Node | None = None
        self.red = False

    def root(self) -> _Node:
        r = self
        while r.parent is not None:
            r = r.parent
        return r


def _go_left(x: _Node, p: _Node) -> bool:
    """TreeNode's comparison for Long keys (Comparable): by hash, then Long.compareTo; the
    insertion goes left when `x` is not greater than `p`."""
    return (x.hash, x.key) <= (p.hash, p.key)


_OTHER = {"left": "right", "right": "left"}


def _rotate(root: _Node, p: _Node, toward: str) -> _Node:
    """TreeNode.rotateLeft (`toward` "left") or rotateRight: `p`'s child on the other side takes
    its place and `p` becomes that child's `toward` child; answers the root."""
    far = _OTHER[toward]
    r: _Node | None = getattr(p, far)
    if r is None:
        return root
    inner: _Node | None = getattr(r, toward)
    setattr(p, far, inner)
    if inner is not None:
        inner.parent = p
    pp = r.parent = p.parent
    if pp is None:
        root = r
        r.red = False
    elif getattr(pp, toward) is p:
        setattr(pp, toward, r)
    else:
        setattr(pp, far, r)
    setattr(r, toward, p)
    p.parent = r
    return root


def _balance_insertion(root: _Node, x: _Node) -> _Node:
    """TreeNode.balanceInsertion: the red-black fix-up after inserting `x`; answers the root.
    Java spells out the two mirror cases; `near` is the side of the grandparent `xp` is on."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        near = "left" if xp is xpp.left else "right"
        far = _OTHER[near]
        uncle: _Node | None = getattr(xpp, far)
        if uncle is not None and uncle.red:
            uncle.red = xp.red = False
            xpp.red = True
            x = xpp
            continue
        if x is getattr(xp, far):
            x = xp
            root = _rotate(root, x, near)
            xp = x.parent
            xpp = None if xp is None else xp.parent
        if xp is not None:
            xp.red = False
            if xpp is not None:
                xpp.red = True
                root = _rotate(root, xpp, far)


class _JavaHashMap:
    """The key order of a `new HashMap<Long, V>()` under a sequence of puts (no removals)."""

    def __init__(self) -> None:
        self.table: list[_Node | None] = []
        self.threshold = 0
        self.size = 0

    def keys(self) -> Iterator[int]:
        """HashMap's iteration order: bucket by bucket, each along its `next` links."""
        for head in self.table:
            node = head
            while node is not None:
                yield node.key
                node = node.next

    def put(self, key: int) -> None:
        """HashMap.putVal for a key (the value plays no part in the order)."""
        h = spread_hash(key)
        if not self.table:
            self._resize()
        i = h & (len(self.table) - 1)
        p = self.table[i]
        if p is None:
            self.table[i] = _Node(key, h)
        elif p.key == key:
            return
        elif p.tree:
            if not self._put_tree_val(p, key, h):
                return
        else:
            bin_count = 0
            while True:
                e = p.next
                if e is None:
                    p.next = _Node(key, h)
                    if bin_count >= _TREEIFY_THRESHOLD - 1:
                        self._treeify_bin(h)
                    break
                if e.key == key:
                    return
                p = e
                bin_count += 1
        self.size += 1
        if self.size > self.threshold:
            self._resize()

    def _resize(self) -> None:
        old = self.table
        if not old:
            self.table = [None] * _DEFAULT_INITIAL_CAPACITY
            self.threshold = _DEFAULT_INITIAL_CAPACITY * 3 // 4
            return
        bit = len(old)
        new: list[_Node | None] = [None] * (bit * 2)
        self.table = new
        self.threshold *= 2
        for j, e in enumerate(old):
            if e is None:
                continue
            if e.next is None:
                new[e.hash & (len(new) - 1)] = e
            elif e.tree:
                self._split(e, j, bit)
            else:
                lo, hi = self._partition(e, bit)
                new[j] = lo[0] if lo else None
                new[j + bit] = hi[0] if hi else None

    @staticmethod
    def _partition(head: _Node, bit: int) -> tuple[list[_Node], list[_Node]]:
        """A bucket's chain split in two by the new hash bit, each half keeping its order and
        relinked."""
        lo: list[_Node] = []
        hi: list[_Node] = []
        node: _Node | None = head
        while node is not None:
            (hi if node.hash & bit else lo).append(node)
            node = node.next
        for half in (lo, hi):
            before: _Node | None = None
            for n in half:
                n.prev, n.next = before, None
                if before is not None:
                    before.next = n
                before = n
        return lo, hi

    def _split(self, head: _Node, index: int, bit: int) -> None:
        """TreeNode.split: each half untreeified when small, else re-treeified when the other
        half took nodes away (an intact tree keeps its shape and order)."""
        lo, hi = self._partition(head, bit)
        for half, other, at in ((lo, hi, index), (hi, lo, index + bit)):
            if not half:
                continue
            self.table[at] = half[0]
            if len(half) <= _UNTREEIFY_THRESHOLD:
                for n in half:
                    n.tree = False
                    n.parent = n.left = n.right = n.prev = None
            elif other:
                self._treeify(half[0])

    def _treeify_bin(self, h: int) -> None:
        if len(self.table) < _MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        head = self.table[h & (len(self.table) - 1)]
        prev: _Node | None = None
        node = head
        while node is not None:
            node.tree, node.prev = True, prev
            prev, node = node, node.next
        if head is not None:
            self._treeify(head)

    def _treeify(self, head: _Node) -> None:
        """TreeNode.treeify: insert each node of the chain, in order, into a red-black tree."""
        root: _Node | None = None
        x: _Node | None = head
        while x is not None:
            nxt = x.next
            x.left = x.right = None
            if root is None:
                x.parent, x.red, root = None, False, x
            else:
                p = root
                while True:
                    left = _go_left(x, p)
                    child = p.left if left else p.right
                    if child is None:
                        x.parent = p
                        if left:
                            p.left = x
                        else:
                            p.right = x
                        root = _balance_insertion(root, x)
                        break
                    p = child
            x = nxt
        assert root is not None
        self._move_root_to_front(root)

    def _put_tree_val(self, head: _Node, key: int, h: int) -> bool:
        """TreeNode.putTreeVal: False when the key is already there, else the new node goes
        below its tree parent and right after it in the linked order."""
        root = head.root()
        p = root
        while True:
            if p.key == key:
                return False
            x = _Node(key, h)
            left = _go_left(x, p)
            child = p.left if left else p.right
            if child is None:
                xpn = p.next
                x.tree, x.next = True, xpn
                if left:
                    p.left = x
                else:
                    p.right = x
                p.next = x
                x.parent = x.prev = p
                if xpn is not None:
                    xpn.prev = x
                self._move_root_to_front(_balance_insertion(root, x))
                return True
            p = child

    def _move_root_to_front(self, root: _Node) -> None:
        index = root.hash & (len(self.table) - 1)
        first = self.table[index]
        if first is root:
            return
        rn, rp = root.next, root.prev
        if rn is not None:
            rn.prev = rp
        if rp is not None:
            rp.next = rn
        if first is not None:
            first.prev = root
        root.next, root.prev = first, None
        self.table[index] = root


def hash_map_order(keys: Iterable[int]) -> tuple[int, ...]:
    """The iteration order of a `new HashMap<Long, …>()` after `put(k, …)` for each key in
    order (a key put again keeps its place).

    Example: ``hash_map_order([2, 1, 0])`` is ``(0, 1, 2)``; ``hash_map_order([16, 0])`` is
    ``(16, 0)`` (one bucket, put order); ``hash_map_order([*range(13), 16])`` ends ``12, 16``
    (14 entries: the table has grown to 32 buckets).
    """
    model = _JavaHashMap()
    for key in keys:
        model.put(key)
    return tuple(model.keys())


class BrokerAddrs(Mapping[int, str]):
    """`BrokerData.brokerAddrs` (HashMap<Long, String>): broker id → address, built by putting
    `entries` in order into a new HashMap, and iterated in that HashMap's order (see the module
    docstring). Equality ignores order, as HashMap.equals does. A repeated id keeps its first
    place and takes the last address.

    Example: ``BrokerAddrs([(1, "s:1"), (0, "m:1")])`` iterates ``0`` then ``1``, so its first
    entry — the fallback of REQ-6 and OFFSET-7 — is the master ``"m:1"``.
    """

    __slots__ = ("_addrs", "_order")

    def __init__(self, entries: Iterable[tuple[int, str]] = ()) -> None:
        addrs: dict[int, str] = {}
        puts: list[int] = []
        for pair in entries:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise InvalidTypeError("brokerAddrs entry", pair, "(brokerId, address)")
            broker_id = require_range("brokerId", pair[0], LONG_MIN, LONG_MAX)
            addrs[broker_id] = require_str("address", pair[1])
            puts.append(broker_id)
        self._addrs = addrs
        self._order = hash_map_order(puts)

    def __getitem__(self, broker_id: int) -> str:
        return self._addrs[broker_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"BrokerAddrs({[(i, self._addrs[i]) for i in self._order]!r})"
