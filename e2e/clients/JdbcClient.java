import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * One run of the compatibility matrix with pgJDBC, driven by
 * e2e/clients_test.go: java -cp postgresql.jar JdbcClient.java. Connection
 * settings come from DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER,
 * DPPROXY_PASSWORD and DPPROXY_DB. It prints one JSON object with what it
 * saw; the Go test judges it. An unexpected failure throws: non-zero exit,
 * stack trace on stderr.
 *
 * pgJDBC speaks the extended protocol: a PreparedStatement runs as an
 * unnamed statement for its first prepareThreshold (5) executions, then as
 * a named server-side statement with binary results for some types, so the
 * DP query runs seven times (the repeats are answered from the proxy's
 * cache, free of charge) to cover both. Everything is in one program
 * because a JVM start costs seconds.
 */
public class JdbcClient {
    static final String DP_SQL = "SELECT region, count(*) AS n, avg(amount) AS mean FROM orders "
            + "WHERE amount > ? GROUP BY region ORDER BY region";

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + System.getenv("DPPROXY_HOST") + ":" + System.getenv("DPPROXY_PORT")
                + "/" + System.getenv("DPPROXY_DB");
        Properties props = new Properties();
        props.setProperty("user", System.getenv("DPPROXY_USER"));
        props.setProperty("password", System.getenv("DPPROXY_PASSWORD"));
        props.setProperty("sslmode", "disable");
        props.setProperty("ApplicationName", "matrix-jdbc");
        StringBuilder out = new StringBuilder("{");
        try (Connection conn = DriverManager.getConnection(url, props)) {
            DatabaseMetaData md = conn.getMetaData();
            field(out, "driver", md.getDriverName() + " " + md.getDriverVersion());
            field(out, "server_version", md.getDatabaseProductVersion());
            field(out, "schema", conn.getSchema());
            field(out, "isolation", String.valueOf(conn.getTransactionIsolation()));

            // Browse the schema as BI tools do: DatabaseMetaData.
            List<String> schemas = new ArrayList<>();
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) schemas.add(rs.getString("TABLE_SCHEM"));
            }
            list(out, "schemas", schemas);
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
                while (rs.next()) tables.add(rs.getString("TABLE_NAME"));
            }
            list(out, "tables", tables);
            StringBuilder cols = new StringBuilder("{");
            try (ResultSet rs = md.getColumns(null, "public", "orders", "%")) {
                while (rs.next()) {
                    if (cols.length() > 1) cols.append(',');
                    cols.append(quote(rs.getString("COLUMN_NAME"))).append(':').append(quote(rs.getString("TYPE_NAME")));
                }
            }
            out.append(quote("columns")).append(':').append(cols).append("},");
            List<String> pk = new ArrayList<>();
            try (ResultSet rs = md.getPrimaryKeys(null, "public", "orders")) {
                while (rs.next()) pk.add(rs.getString("COLUMN_NAME"));
            }
            list(out, "primary_key", pk);
            List<String> fks = new ArrayList<>();
            try (ResultSet rs = md.getImportedKeys(null, "public", "orders")) {
                while (rs.next()) fks.add(rs.getString("FKCOLUMN_NAME") + "->" + rs.getString("PKTABLE_NAME"));
            }
            list(out, "foreign_keys", fks);

            try (PreparedStatement ps = conn.prepareStatement(DP_SQL)) {
                ps.setInt(1, 10);
                out.append(quote("dp")).append(':').append(dpResult(ps)).append(',');
                for (int i = 0; i < 6; i++) {
                    dpResult(ps); // crosses prepareThreshold: a named statement
                }
                out.append(quote("dp_named")).append(':').append(dpResult(ps)).append(',');

                // A refusal, then the same connection and statement again.
                try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT * FROM orders")) {
                    field(out, "refusal", "none");
                } catch (SQLException e) {
                    field(out, "refusal", e.getSQLState());
                    field(out, "refusal_message", e.getMessage().split("\n")[0]);
                }
                ps.setInt(1, 400);
                out.append(quote("dp_after")).append(':').append(dpResult(ps)).append(',');
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM products WHERE price > ?")) {
                ps.setBigDecimal(1, java.math.BigDecimal.ZERO);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    out.append(quote("public_count")).append(':').append(rs.getLong(1));
                }
            }
        }
        System.out.println(out.append('}'));
    }

    static String dpResult(PreparedStatement ps) throws SQLException {
        StringBuilder b = new StringBuilder("{");
        try (ResultSet rs = ps.executeQuery()) {
            ResultSetMetaData m = rs.getMetaData();
            List<String> types = new ArrayList<>(), names = new ArrayList<>();
            for (int i = 1; i <= m.getColumnCount(); i++) {
                types.add(m.getColumnTypeName(i));
                names.add(m.getColumnLabel(i));
            }
            list(b, "type_names", types);
            list(b, "names", names);
            b.append(quote("rows")).append(":[");
            boolean first = true;
            while (rs.next()) {
                if (!first) b.append(',');
                first = false;
                b.append('[').append(quote(rs.getString(1))).append(',').append(rs.getLong(2)).append(',')
                        .append(rs.getBigDecimal(3).doubleValue()).append(']');
            }
            b.append("]");
        }
        return b.append('}').toString();
    }

    static void field(StringBuilder b, String k, String v) {
        b.append(quote(k)).append(':').append(quote(v)).append(',');
    }

    static void list(StringBuilder b, String k, List<String> vs) {
        b.append(quote(k)).append(":[");
        for (int i = 0; i < vs.size(); i++) {
            if (i > 0) b.append(',');
            b.append(quote(vs.get(i)));
        }
        b.append("],");
    }

    static String quote(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
