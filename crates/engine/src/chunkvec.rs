//! A vector in shared chunks: cloning it (a table version is copied on every write batch) copies
//! one pointer per chunk of [`CHUNK`] elements instead of every element, and changing an element
//! copies only its chunk when another version still shares it.

use std::sync::Arc;

pub const CHUNK: usize = 256;

#[derive(Debug)]
pub struct ChunkVec<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Clone for ChunkVec<T> {
    fn clone(&self) -> Self {
        ChunkVec {
            chunks: self.chunks.clone(),
            len: self.len,
        }
    }
}

impl<T> Default for ChunkVec<T> {
    fn default() -> Self {
        ChunkVec {
            chunks: vec![],
            len: 0,
        }
    }
}

impl<T: Clone> ChunkVec<T> {
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        // every chunk but the last is full and the last is not empty: `i` is below `len` exactly
        // when its chunk and its place in it are there (two checks, none of which panics)
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }
    /// Element `i`, its chunk copied first if another version shares it.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            Some(&mut Arc::make_mut(&mut self.chunks[i / CHUNK])[i % CHUNK])
        } else {
            None
        }
    }
    pub fn push(&mut self, x: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        Arc::make_mut(self.chunks.last_mut().expect("a chunk")).push(x);
        self.len += 1;
    }
    pub fn pop(&mut self) -> Option<T> {
        let last = self.chunks.last_mut()?;
        let x = Arc::make_mut(last).pop();
        if last.is_empty() {
            self.chunks.pop();
        }
        if x.is_some() {
            self.len -= 1;
        }
        x
    }
    /// Exchange elements `i` and `j` (both in range).
    pub fn swap(&mut self, i: usize, j: usize) {
        if i == j {
            return;
        }
        let a = self[i].clone();
        let b = std::mem::replace(self.get_mut(j).expect("in range"), a);
        *self.get_mut(i).expect("in range") = b;
    }
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

impl<T: Clone> std::ops::Index<usize> for ChunkVec<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        self.get(i)
            .unwrap_or_else(|| panic!("index {i} out of range (length {})", self.len))
    }
}

impl<T: Clone> std::ops::IndexMut<usize> for ChunkVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let len = self.len;
        self.get_mut(i)
            .unwrap_or_else(|| panic!("index {i} out of range (length {len})"))
    }
}

impl<'a, T: Clone> IntoIterator for &'a ChunkVec<T> {
    type Item = &'a T;
    type IntoIter = Box<dyn Iterator<Item = &'a T> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_vec_and_versions_stay_apart() {
        let mut v: ChunkVec<u32> = ChunkVec::default();
        let mut r: Vec<u32> = vec![];
        let mut seed = 3u64;
        let mut versions = vec![];
        for round in 0..5000u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match (seed >> 33) % 5 {
                0 | 1 => {
                    v.push(round);
                    r.push(round);
                }
                2 if !r.is_empty() => assert_eq!(v.pop(), r.pop()),
                3 if !r.is_empty() => {
                    let (i, j) = (
                        (seed >> 8) as usize % r.len(),
                        (seed >> 20) as usize % r.len(),
                    );
                    v.swap(i, j);
                    r.swap(i, j);
                }
                4 if !r.is_empty() => {
                    let i = (seed >> 8) as usize % r.len();
                    v[i] = round;
                    r[i] = round;
                }
                _ => {}
            }
            if round % 500 == 0 {
                versions.push((v.clone(), r.clone()));
            }
            assert_eq!(v.len(), r.len());
        }
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), r);
        // every version kept what it had when it was taken
        for (cv, rv) in &versions {
            assert_eq!(cv.iter().copied().collect::<Vec<_>>(), *rv);
        }
        assert_eq!(v.get(r.len()), None);
    }
}
