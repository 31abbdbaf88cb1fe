"""The state document as the loop holds it between rounds: its versions and what is derived from
them once per version (`document`), and the Partitions list's index kept while only loads change
(`layout`)."""
