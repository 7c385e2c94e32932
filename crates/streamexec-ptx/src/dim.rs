//! CUDA's `dim3`: the extents of a grid (in blocks) or a block (in threads).

/// Three extents, as CUDA's `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Fastest-varying extent.
    pub x: u32,
    /// Middle extent.
    pub y: u32,
    /// Slowest-varying extent.
    pub z: u32,
}

impl Dim3 {
    /// A `Dim3` from its three extents.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `x * y * z`.
    pub const fn count(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// Row-major linear index of `idx` inside `self` (x fastest).
    pub const fn linear(&self, idx: Dim3) -> u64 {
        (idx.z as u64 * self.y as u64 + idx.y as u64) * self.x as u64 + idx.x as u64
    }

    /// Inverse of [`Dim3::linear`].
    pub const fn unlinear(&self, i: u64) -> Dim3 {
        let x = (i % self.x as u64) as u32;
        let rest = i / self.x as u64;
        Dim3 {
            x,
            y: (rest % self.y as u64) as u32,
            z: (rest / self.y as u64) as u32,
        }
    }
}

impl Default for Dim3 {
    fn default() -> Self {
        Dim3::new(1, 1, 1)
    }
}

impl std::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dim3_linear_round_trips() {
        let d = Dim3::new(7, 5, 3);
        for i in 0..d.count() {
            assert_eq!(d.linear(d.unlinear(i)), i);
        }
        assert_eq!(d.unlinear(7 * 5 + 7 + 2), Dim3::new(2, 1, 1));
    }
}
