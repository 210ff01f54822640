//! [`Table`]: a small writer of aligned text tables (columns padded to their widest cell,
//! two spaces apart, the last column unpadded), measured in characters.

use std::io::Write;

/// Rows of cells under a header.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped. Control characters
    /// (a task message with a newline) are shown as spaces so a row stays one line.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells: Vec<String> = cells
            .into_iter()
            .take(self.header.len())
            .map(|c| {
                c.chars()
                    .map(|ch| if ch.is_control() { ' ' } else { ch })
                    .collect()
            })
            .collect();
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes the header and the rows, aligned.
    pub fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    let pad = width - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(&["ID", "STATE", "MESSAGE"]);
        t.row(vec!["a".into(), "running".into(), "ok".into()]);
        t.row(vec!["long-id".into(), "é".into(), "two\nlines".into()]);
        t.row(vec!["x".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "ID       STATE    MESSAGE\n\
             a        running  ok\n\
             long-id  é        two lines\n\
             x\n"
        );
        assert_eq!(t.len(), 3);
    }
}
