//! A group's members and the member a hash picks (load balancing over
//! equal next hops, action selectors, ECMP/LAG groups).
//!
//! Contract:
//! - stores: a set of distinct `u32` member ids, kept in id order;
//! - pick cost: [`MemberSet::pick`] is a remainder and an array read. The
//!   member picked is number `hash % len` in id order, bmv2's rule for
//!   action selectors: adding or removing a member moves the flows of most
//!   others (no consistent hashing), exactly as bmv2 does. Inserts and
//!   removes shift the ids after them (groups change rarely and hold at
//!   most a few thousand members);
//! - concurrency: mutation takes `&mut self`, picks `&self`; threads that
//!   pick while another changes the group need their own copies.

/// A group's member ids, kept sorted in a vector.
///
/// Why not a `BTreeSet`: the packet path picks member number
/// `hash % len` in id order on every packet, which is an index here but a
/// walk through a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSet(Vec<u32>);

impl MemberSet {
    /// Adds `m`; `false` when it was already there.
    pub fn insert(&mut self, m: u32) -> bool {
        match self.0.binary_search(&m) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, m);
                true
            }
        }
    }

    /// Removes `m`; `false` when it was not there.
    pub fn remove(&mut self, m: &u32) -> bool {
        match self.0.binary_search(m) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &u32) -> bool {
        self.0.binary_search(m).is_ok()
    }

    /// The members in id order.
    pub fn iter(&self) -> std::slice::Iter<'_, u32> {
        self.0.iter()
    }

    /// Member number `i` in id order.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u32> {
        self.0.get(i).copied()
    }

    /// The member `hash` picks: number `hash % len` in id order; `None`
    /// for an empty group.
    #[inline]
    pub fn pick(&self, hash: u64) -> Option<u32> {
        let n = self.0.len() as u64;
        if n == 0 {
            return None;
        }
        // The same remainder from a 32-bit division when both fit (a
        // group's size always does; bmv2's hashes are taken to 32 bits):
        // the member's data waits on it, and the 64-bit one is slower.
        let i = match (u32::try_from(hash), u32::try_from(n)) {
            (Ok(h), Ok(n)) => (h % n) as u64,
            _ => hash % n,
        };
        self.get(i as usize)
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the group has no member.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<u32> for MemberSet {
    fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> Self {
        let mut v: Vec<u32> = it.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        MemberSet(v)
    }
}

impl<'a> IntoIterator for &'a MemberSet {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_stay_sorted_and_distinct() {
        let mut s: MemberSet = [9, 3, 7, 3].into_iter().collect();
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), [3, 7, 9]);
        assert!(s.insert(5));
        assert!(!s.insert(7));
        assert!(s.remove(&3));
        assert!(!s.remove(&3));
        assert!(s.contains(&5) && !s.contains(&3));
        assert_eq!((&s).into_iter().copied().collect::<Vec<_>>(), [5, 7, 9]);
        assert_eq!((s.len(), s.get(1), s.get(3)), (3, Some(7), None));
    }

    #[test]
    fn a_hash_picks_its_remainder_in_id_order() {
        let s: MemberSet = [40, 10, 30, 20].into_iter().collect();
        for (hash, want) in [(0u64, 10), (1, 20), (6, 30), (7, 40), (u64::MAX, 40)] {
            assert_eq!(s.pick(hash), Some(want), "hash {hash}");
        }
        assert_eq!(MemberSet::default().pick(5), None);
    }
}
