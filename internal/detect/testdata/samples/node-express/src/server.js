const express = require('express');
const { Pool } = require('pg');

const app = express();
const pool = new Pool({ connectionString: process.env.DATABASE_URL });
const port = process.env.PORT || 3000;

app.use(express.json());

app.get('/healthz', (req, res) => res.send('ok'));

app.get('/notes', async (req, res) => {
  const { rows } = await pool.query('SELECT id, body FROM notes ORDER BY id');
  res.json(rows);
});

app.listen(port, () => {
  console.log(`listening on ${port}`);
});
